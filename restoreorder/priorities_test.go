package restoreorder_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/restoreorder"
)

func TestParsePriorities(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    restoreorder.Priorities
		wantErr bool
	}{
		{name: "empty", in: "", want: restoreorder.Priorities{}},
		{name: "blank", in: "  ", want: restoreorder.Priorities{}},
		{name: "high only", in: "a,b", want: restoreorder.Priorities{High: []string{"a", "b"}}},
		{name: "both", in: "a,b,-,c,d", want: restoreorder.Priorities{High: []string{"a", "b"}, Low: []string{"c", "d"}}},
		{name: "leading separator fills only low", in: "-,c,d", want: restoreorder.Priorities{Low: []string{"c", "d"}}},
		{name: "trailing separator fills only high", in: "a,b,-", want: restoreorder.Priorities{High: []string{"a", "b"}}},
		{name: "separator alone", in: "-", want: restoreorder.Priorities{}},
		{name: "spaces are trimmed", in: " a , b ,-, c", want: restoreorder.Priorities{High: []string{"a", "b"}, Low: []string{"c"}}},
		{name: "repeats are kept", in: "a,a,-,a", want: restoreorder.Priorities{High: []string{"a", "a"}, Low: []string{"a"}}},
		{name: "two separators", in: "a,-,b,-,c", wantErr: true},
		{name: "two separators adjacent", in: "-,-", wantErr: true},
		{name: "empty name", in: "a,,b", wantErr: true},
		{name: "trailing comma", in: "a,b,", wantErr: true},
		{name: "blank name", in: "a, ,b", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := restoreorder.ParsePriorities(tc.in)
			if tc.wantErr {
				require.ErrorIs(t, err, restoreorder.ErrInvalidPriorities)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePriorities(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestPrioritiesString(t *testing.T) {
	tests := []struct {
		name string
		p    restoreorder.Priorities
		want string
	}{
		{name: "zero", want: ""},
		{name: "high only", p: restoreorder.Priorities{High: []string{"a", "b"}}, want: "a,b"},
		{name: "low only", p: restoreorder.Priorities{Low: []string{"c"}}, want: "-,c"},
		{name: "both", p: restoreorder.Priorities{High: []string{"a"}, Low: []string{"c", "d"}}, want: "a,-,c,d"},
		{name: "empty low is left out", p: restoreorder.Priorities{High: []string{"a"}, Low: []string{}}, want: "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.p.String())
		})
	}
}

func TestPrioritiesStringDoesNotAlias(t *testing.T) {
	high := make([]string, 1, 8)
	high[0] = "a"
	p := restoreorder.Priorities{High: high, Low: []string{"z"}}
	require.Equal(t, "a,-,z", p.String())
	require.Equal(t, "a", high[:2][0])
	require.Empty(t, high[1:2][0], "String wrote into the spare capacity of High")
}

func TestDefaultPriorities(t *testing.T) {
	want := "customresourcedefinitions,namespaces,storageclasses," +
		"volumesnapshotclass.snapshot.storage.k8s.io,volumesnapshotcontents.snapshot.storage.k8s.io," +
		"volumesnapshots.snapshot.storage.k8s.io,datauploads.velero.io,persistentvolumes," +
		"persistentvolumeclaims,clusterroles,roles,serviceaccounts,clusterrolebindings,rolebindings," +
		"secrets,configmaps,limitranges,priorityclasses,pods,replicasets.apps," +
		"clusterclasses.cluster.x-k8s.io,endpoints,services," +
		"-," +
		"clusterbootstraps.run.tanzu.vmware.com,clusters.cluster.x-k8s.io," +
		"clusterresourcesets.addons.cluster.x-k8s.io,apps.kappctrl.k14s.io,packageinstalls.packaging.carvel.dev"
	d := restoreorder.DefaultPriorities()
	require.Equal(t, want, d.String())
	require.Len(t, d.High, 23)
	require.Len(t, d.Low, 5)

	d.High[0] = "changed"
	require.Equal(t, "customresourcedefinitions", restoreorder.DefaultPriorities().High[0], "DefaultPriorities shares its slices")
}

func TestPrioritiesMerge(t *testing.T) {
	required := restoreorder.Priorities{High: []string{"crds", "namespaces", "pvs", "pods"}, Low: []string{"clusters", "apps"}}
	tests := []struct {
		name      string
		user      string
		want      string
		wantAdded []string
	}{
		{
			name:      "empty user list gets everything",
			user:      "",
			want:      "crds,namespaces,pvs,pods,-,clusters,apps",
			wantAdded: []string{"crds", "namespaces", "pvs", "pods", "clusters", "apps"},
		},
		{
			name: "complete user list is unchanged",
			user: "pods,crds,namespaces,pvs,-,apps,clusters",
			want: "pods,crds,namespaces,pvs,-,apps,clusters",
		},
		{
			name:      "a missing name goes after its predecessor in required",
			user:      "crds,widgets,pvs,pods,-,clusters,apps",
			want:      "crds,namespaces,widgets,pvs,pods,-,clusters,apps",
			wantAdded: []string{"namespaces"},
		},
		{
			name:      "with no predecessor present, before the nearest successor",
			user:      "widgets,namespaces,pods,-,clusters,apps",
			want:      "widgets,crds,namespaces,pvs,pods,-,clusters,apps",
			wantAdded: []string{"crds", "pvs"},
		},
		{
			name:      "with no required neighbour, at the start, ahead of user names",
			user:      "widgets,gadgets,-,x",
			want:      "crds,namespaces,pvs,pods,widgets,gadgets,-,clusters,apps,x",
			wantAdded: []string{"crds", "namespaces", "pvs", "pods", "clusters", "apps"},
		},
		{
			name:      "a name the user moved to the other list stays there",
			user:      "crds,namespaces,pvs,-,pods",
			want:      "crds,namespaces,pvs,-,clusters,apps,pods",
			wantAdded: []string{"clusters", "apps"},
		},
		{
			name:      "low list: after the predecessor",
			user:      "crds,namespaces,pvs,pods,-,clusters,mine",
			want:      "crds,namespaces,pvs,pods,-,clusters,apps,mine",
			wantAdded: []string{"apps"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			user, err := restoreorder.ParsePriorities(tc.user)
			require.NoError(t, err)
			before := user.String()
			merged, added := user.Merge(required)
			require.Equal(t, tc.want, merged.String())
			if diff := cmp.Diff(tc.wantAdded, added); diff != "" {
				t.Errorf("added (-want +got):\n%s", diff)
			}
			require.Equal(t, before, user.String(), "Merge changed its receiver")
			again, addedAgain := merged.Merge(required)
			require.Equal(t, merged.String(), again.String(), "merging twice")
			require.Empty(t, addedAgain)
		})
	}
}

func TestPrioritiesMergeDefaults(t *testing.T) {
	user, err := restoreorder.ParsePriorities("namespaces,pods,-,clusters.cluster.x-k8s.io")
	require.NoError(t, err)
	merged, added := user.Merge(restoreorder.DefaultPriorities())
	d := restoreorder.DefaultPriorities()
	require.Len(t, added, len(d.High)+len(d.Low)-3)
	require.Equal(t, []string{"customresourcedefinitions", "namespaces", "storageclasses"}, merged.High[:3])
	require.Equal(t, "pods", merged.High[len(merged.High)-5], "pods keeps its place among the defaults")
	require.Equal(t, d.Low, merged.Low)
}

// FuzzParsePriorities checks that the text form round-trips: whatever ParsePriorities
// accepts, printing and parsing again gives the same priorities, and nothing it returns
// could be misread (no empty name, no separator, no comma, no surrounding space).
func FuzzParsePriorities(f *testing.F) {
	f.Add("customresourcedefinitions,namespaces,-,clusters.cluster.x-k8s.io")
	f.Add("-,a")
	f.Add("a,-")
	f.Add("-")
	f.Add("a,,b")
	f.Add(" a , b ")
	f.Add(restoreorder.DefaultPriorities().String())
	f.Fuzz(func(t *testing.T, s string) {
		p, err := restoreorder.ParsePriorities(s)
		if err != nil {
			require.ErrorIs(t, err, restoreorder.ErrInvalidPriorities)
			return
		}
		for _, n := range append(append([]string{}, p.High...), p.Low...) {
			if n == "" || n == "-" || strings.Contains(n, ",") || strings.TrimSpace(n) != n {
				t.Fatalf("ParsePriorities(%q) gave name %q", s, n)
			}
		}
		again, err := restoreorder.ParsePriorities(p.String())
		require.NoError(t, err, "parsing %q, the String of ParsePriorities(%q)", p.String(), s)
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("round trip of %q via %q (-first +second):\n%s", s, p.String(), diff)
		}
	})
}

// FuzzPrioritiesRoundTrip builds priorities from names and checks that String and
// ParsePriorities give them back.
func FuzzPrioritiesRoundTrip(f *testing.F) {
	f.Add("pods;replicasets.apps", "clusters.cluster.x-k8s.io")
	f.Add("", "a;b")
	f.Add("a", "")
	f.Fuzz(func(t *testing.T, high, low string) {
		names := func(s string) []string {
			var out []string
			for _, n := range strings.Split(s, ";") {
				n = strings.TrimSpace(n)
				if n != "" && n != "-" && !strings.Contains(n, ",") {
					out = append(out, n)
				}
			}
			return out
		}
		p := restoreorder.Priorities{High: names(high), Low: names(low)}
		got, err := restoreorder.ParsePriorities(p.String())
		require.NoError(t, err)
		if diff := cmp.Diff(p, got); diff != "" {
			t.Fatalf("ParsePriorities(%q) (-want +got):\n%s", p.String(), diff)
		}
	})
}
