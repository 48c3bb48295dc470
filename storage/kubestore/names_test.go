package kubestore

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

func TestObjectNameExamples(t *testing.T) {
	for _, tc := range []struct {
		p    kv.Partition
		want string
	}{
		{kv.Partition{Kind: phase.Backup, Name: "shop/nightly"}, "b.shopz2fnightly"},
		{kv.Partition{Kind: phase.Restore, Name: "Nightly"}, "r.z4eightly"},
		{kv.Partition{Kind: "DatabaseSnapshot", Name: "a-b.z"}, "kz44atabasez53napshot.az2dbz2ez7a"},
	} {
		if got := objectName(tc.p); got != tc.want {
			t.Errorf("objectName(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// validOwner reports whether kind and name make an owner that a store takes.
func validOwner(kind, name string) bool {
	return operations.Owner{Kind: phase.Kind(kind), Name: name}.Validate() == nil
}

// checkNames fails t when the object name of a valid owner is not a DNS-1123 subdomain,
// or when two distinct valid owners get the same name.
func checkNames(t *testing.T, a, b kv.Partition) {
	t.Helper()
	for _, p := range []kv.Partition{a, b} {
		if !validOwner(string(p.Kind), p.Name) {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(objectName(p)); len(errs) > 0 {
			t.Fatalf("objectName(%q) = %q: %v", p, objectName(p), errs)
		}
	}
	if a != b && validOwner(string(a.Kind), a.Name) && validOwner(string(b.Kind), b.Name) && objectName(a) == objectName(b) {
		t.Fatalf("objectName(%q) = objectName(%q) = %q", a, b, objectName(a))
	}
}

// TestObjectNameEveryByte maps owners whose names hold every byte, alone and around
// the escape character, at every length around the switch to the long form (where a
// cut may fall inside an escape), and checks that each is a valid name and that no two
// collide.
func TestObjectNameEveryByte(t *testing.T) {
	kinds := []phase.Kind{phase.Backup, phase.Restore, "Z", "Zz9", phase.Kind("K" + strings.Repeat("z", 62))}
	seen := map[string]kv.Partition{}
	add := func(p kv.Partition) {
		name := objectName(p)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("objectName(%q) = %q: %v", p, name, errs)
		}
		if q, ok := seen[name]; ok && q != p {
			t.Fatalf("objectName(%q) = objectName(%q) = %q", p, q, name)
		}
		seen[name] = p
	}
	for _, k := range kinds {
		for c := range 256 {
			add(kv.Partition{Kind: k, Name: string(rune(0)) + string([]byte{byte(c)})})
			add(kv.Partition{Kind: k, Name: string([]byte{byte(c)})})
			add(kv.Partition{Kind: k, Name: "z" + string([]byte{byte(c)}) + "z"})
		}
		for n := 40; n < 300; n++ {
			for _, fill := range []string{"a", "Z", "a.", "aZ", "aaZ"} {
				add(kv.Partition{Kind: k, Name: strings.Repeat(fill, n)[:n]})
				add(kv.Partition{Kind: k, Name: strings.Repeat(fill, n)[:n] + "x"})
			}
		}
		add(kv.Partition{Kind: k, Name: strings.Repeat("Z", operations.MaxNameBytes)})
	}
}

func FuzzObjectName(f *testing.F) {
	f.Add("Backup", "shop/nightly", "Restore", "shop/nightly")
	f.Add("Backup", "a", "DatabaseSnapshot", "a")
	f.Add("Backup", strings.Repeat("Z", 300), "Backup", strings.Repeat("Z", 299)+"a")
	f.Fuzz(func(t *testing.T, kindA, nameA, kindB, nameB string) {
		checkNames(t, kv.Partition{Kind: phase.Kind(kindA), Name: nameA}, kv.Partition{Kind: phase.Kind(kindB), Name: nameB})
	})
}
