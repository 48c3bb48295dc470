package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// uploader is the operator's v2 plugin: it hands each volume claim to an upload service
// (simulated here: every upload takes the same time on clock) and returns at once with
// the upload's ID, which the Monitor then asks about.
type uploader struct {
	took  time.Duration
	clock clock.Clock

	// uploadsMu guards uploads: when each upload started, by ID.
	uploadsMu sync.Mutex
	uploads   map[string]time.Time
}

var _ adapters.BackupItemAction[*AppBackup] = (*uploader)(nil)

func newUploader(took time.Duration, clock clock.Clock) *uploader {
	return &uploader{took: took, clock: clock, uploads: map[string]time.Time{}}
}

func (*uploader) Name() string { return "example.itemops.io/uploader" }

func (*uploader) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, ctx.Err()
}

func (u *uploader) Execute(ctx context.Context, item runtime.Unstructured, b *AppBackup) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, "", nil, err
	}
	meta := item.UnstructuredContent()["metadata"].(map[string]any)
	id := fmt.Sprintf("upload-%s-%s-%s", b.UID, meta["namespace"], meta["name"])
	u.uploadsMu.Lock()
	u.uploads[id] = u.clock.Now()
	u.uploadsMu.Unlock()
	return item, nil, id, nil, nil
}

func (u *uploader) Progress(ctx context.Context, id string, _ *AppBackup) (operations.Progress, error) {
	if err := ctx.Err(); err != nil {
		return operations.Progress{}, err
	}
	u.uploadsMu.Lock()
	started, ok := u.uploads[id]
	u.uploadsMu.Unlock()
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(u.Name(), id)
	}
	const size = 1 << 30
	elapsed := min(u.clock.Now().Sub(started), u.took)
	return operations.Progress{
		Completed: elapsed == u.took, NCompleted: int64(float64(size) * float64(elapsed) / float64(u.took)), NTotal: size,
		OperationUnits: "Bytes", Started: started, Updated: started.Add(elapsed),
	}, nil
}

func (*uploader) Cancel(ctx context.Context, _ string, _ *AppBackup) error { return ctx.Err() }
