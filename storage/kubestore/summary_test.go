package kubestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// TestSummaryShown creates a run with operations, some finished, finishes some more and
// adds others, and changes its phase, in a run kept inline and in one spilled: the run's
// object read back through the API holds the counts of its operations and its phase
// history (what kubectl describe shows), and a Table of it (what kubectl get shows) has
// the kind, run, phase, operations finished of all, and, at priority 1, the two counts.
func TestSummaryShown(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *kubestore.Options
	}{
		{"Inline", nil},
		{"Spilled", &kubestore.Options{InlineBytes: 512, ChunkBytes: 4 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, cfg, ns := newStoreIn(t, tc.opts)
			o := operations.Owner{Kind: phase.Backup, Name: "shown", UID: "uid-shown"}
			ops := testOps(o, 12, operations.OperationInProgress)
			for i := range 3 {
				ops[i].Status.Phase = operations.OperationCompleted
			}
			run := operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0}
			if err := run.SetPhase(phase.InProgress, "started", t0); err != nil {
				t.Fatalf("SetPhase: %v", err)
			}
			if err := s.CreateRunWithOperations(ctx, run, ops[:10]); err != nil {
				t.Fatalf("CreateRunWithOperations: %v", err)
			}
			ops[3].Status.Phase, ops[4].Status.Phase = operations.OperationFailed, operations.OperationCompleted
			ops[5].Status.NCompleted++ // still in progress
			if err := s.PutOperations(ctx, o, ops[3:12]); err != nil {
				t.Fatalf("PutOperations: %v", err)
			}
			if _, err := s.UpdateRun(ctx, o, func(r *operations.Run) error {
				return r.SetPhase(phase.WaitingForPluginOperations, "items done", t0.Add(time.Minute))
			}); err != nil {
				t.Fatalf("UpdateRun: %v", err)
			}
			stored, err := s.GetRun(ctx, o)
			if err != nil {
				t.Fatalf("GetRun: %v", err)
			}

			obj, err := dynamic.NewForConfigOrDie(cfg).Resource(runsGVR).Namespace(ns).Get(ctx, "b.shown", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get the run's object: %v", err)
			}
			status := obj.Object["status"].(map[string]any)
			delete(status, "store")
			var history []any
			for _, h := range stored.History {
				history = append(history, map[string]any{
					"from": string(h.From), "to": string(h.To), "event": string(h.Event),
					"time": h.Time.UTC().Format(time.RFC3339Nano), "reason": h.Reason,
				})
			}
			want := map[string]any{
				"phase":      string(phase.WaitingForPluginOperations),
				"operations": map[string]any{"completed": int64(5), "total": int64(12), "summary": "5/12"},
				"history":    history,
			}
			if diff := cmp.Diff(want, status); diff != "" {
				t.Errorf("the status of the run's object, but its keys (-want +got):\n%s", diff)
			}

			table := getTable(t, cfg, fmt.Sprintf("/apis/%s/%s/namespaces/%s/itemopsruns/b.shown", kubestore.Group, kubestore.Version, ns))
			var columns []string
			priority := map[string]int32{}
			for _, c := range table.ColumnDefinitions {
				columns = append(columns, c.Name)
				priority[c.Name] = c.Priority
			}
			if diff := cmp.Diff([]string{"Name", "Kind", "Run", "Phase", "Operations", "Completed", "Total", "Age"}, columns); diff != "" {
				t.Errorf("the Table's columns (-want +got):\n%s", diff)
			}
			if priority["Completed"] != 1 || priority["Total"] != 1 || priority["Operations"] != 0 {
				t.Errorf("the columns' priorities are %v, want 1 for Completed and Total alone", priority)
			}
			if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(columns) {
				t.Fatalf("the Table has rows %v, want one of %d cells", table.Rows, len(columns))
			}
			cells := table.Rows[0].Cells[:len(columns)-1] // Age, last, is the time since creation
			if diff := cmp.Diff([]any{"b.shown", "Backup", "shown", "WaitingForPluginOperations", "5/12", 5.0, 12.0}, cells); diff != "" {
				t.Errorf("the Table's row but its age (-want +got):\n%s", diff)
			}
		})
	}
}

// getTable GETs path from the API server of cfg as a Table, as kubectl get does.
func getTable(t *testing.T, cfg *rest.Config, path string) metav1.Table {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s as a Table: %v", path, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decode the Table: %v", err)
	}
	return table
}
