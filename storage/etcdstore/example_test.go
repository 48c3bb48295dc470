package etcdstore_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/etcdstore"
)

// endpoint is where the examples find etcd: here, the test binary's own server.
func endpoint() string { return etcdstore.Server().Endpoint() }

func ExampleOpen() {
	ctx := context.Background()
	// The client is the caller's: endpoints, TLS and credentials as the cluster needs.
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	s, err := etcdstore.Open(ctx, client, "example/"+etcdstore.NewPrefix(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	r := operations.Run{Owner: o, Phase: phase.New}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "2 operations pending", time.Now()); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.CreateRun(ctx, r); err != nil {
		fmt.Println(err)
		return
	}
	err = s.PutOperations(ctx, o, []operations.Operation{
		{Owner: o, Action: "velero.io/csi-pvc-backupper", ID: "snap-1", Status: operations.Status{Phase: operations.OperationInProgress}},
		{Owner: o, Action: "velero.io/csi-pvc-backupper", ID: "snap-2", Status: operations.Status{Phase: operations.OperationCompleted}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	waiting, _ := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
	pending, _ := s.ListOperations(ctx, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}})
	fmt.Println(len(waiting), "run waiting for", len(pending), "operation:", pending[0].ID)
	// Output: 1 run waiting for 1 operation: snap-1
}

func ExampleStore_ClaimRun() {
	ctx := context.Background()
	prefix := "example/" + etcdstore.NewPrefix()
	// Two replicas, each with its own client and store on the same prefix.
	var replicas []*etcdstore.Store
	for _, id := range []string{"replica-a", "replica-b"} {
		client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint()}, DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer client.Close()
		s, err := etcdstore.Open(ctx, client, prefix, &etcdstore.Options{Identity: id})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer s.Close()
		replicas = append(replicas, s)
	}
	o := operations.Owner{Kind: phase.Restore, Name: "r1"}
	release, ok, _ := replicas[0].ClaimRun(ctx, o)
	fmt.Println("a claims r1:", ok)
	_, ok, _ = replicas[1].ClaimRun(ctx, o)
	fmt.Println("b claims r1 while a holds it:", ok)
	release()
	releaseB, ok, _ := replicas[1].ClaimRun(ctx, o)
	fmt.Println("b claims r1 after a released it:", ok)
	releaseB()
	// Output:
	// a claims r1: true
	// b claims r1 while a holds it: false
	// b claims r1 after a released it: true
}
