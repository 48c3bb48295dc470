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

	// uploadsMu guards uploads and cancelled: when each upload started, by ID, and the
	// uploads cancelled.
	uploadsMu sync.Mutex
	uploads   map[string]time.Time
	cancelled map[string]bool
}

var _ adapters.BackupItemAction[*AppBackup] = (*uploader)(nil)

func newUploader(took time.Duration, clock clock.Clock) *uploader {
	return &uploader{took: took, clock: clock, uploads: map[string]time.Time{}, cancelled: map[string]bool{}}
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
	cancelled := u.cancelled[id]
	u.uploadsMu.Unlock()
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(u.Name(), id)
	}
	if cancelled {
		return operations.Progress{Completed: true, Err: "upload cancelled"}, nil
	}
	const size = 1 << 30
	elapsed := min(u.clock.Now().Sub(started), u.took)
	return operations.Progress{
		Completed: elapsed == u.took, NCompleted: int64(float64(size) * float64(elapsed) / float64(u.took)), NTotal: size,
		OperationUnits: "Bytes", Started: started, Updated: started.Add(elapsed),
	}, nil
}

func (u *uploader) Cancel(ctx context.Context, id string, _ *AppBackup) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u.uploadsMu.Lock()
	defer u.uploadsMu.Unlock()
	if _, ok := u.uploads[id]; ok {
		u.cancelled[id] = true
	}
	return nil
}
