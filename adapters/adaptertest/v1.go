package adaptertest

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
)

// calls counts the calls of a fake's methods.
type calls struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

// count counts a call of method and returns how many there were, this one included.
func (c *calls) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[method]++
	return c.n[method]
}

// Calls returns how many times the method of that name was called.
func (c *calls) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// BackupItemActionV1 is a fake [adapters.BackupItemActionV1] that counts its calls
// ([BackupItemActionV1.Calls]). AppliesTo returns Selector unless AppliesToFunc is set;
// Execute returns the item unchanged and no additional items unless ExecuteFunc is set.
// It is safe for concurrent use as long as the funcs are; set the fields before the
// first call.
type BackupItemActionV1[B any] struct {
	Selector      adapters.ResourceSelector
	AppliesToFunc func() (adapters.ResourceSelector, error)
	ExecuteFunc   func(item runtime.Unstructured, backup B) (runtime.Unstructured, []operations.ResourceIdentifier, error)
	calls
}

var _ adapters.BackupItemActionV1[struct{}] = (*BackupItemActionV1[struct{}])(nil)

// AppliesTo counts the call and returns AppliesToFunc's answer, or Selector.
func (a *BackupItemActionV1[B]) AppliesTo() (adapters.ResourceSelector, error) {
	a.count("AppliesTo")
	if a.AppliesToFunc != nil {
		return a.AppliesToFunc()
	}
	return a.Selector, nil
}

// Execute counts the call and returns ExecuteFunc's answer, or item unchanged.
func (a *BackupItemActionV1[B]) Execute(item runtime.Unstructured, backup B) (runtime.Unstructured, []operations.ResourceIdentifier, error) {
	a.count("Execute")
	if a.ExecuteFunc != nil {
		return a.ExecuteFunc(item, backup)
	}
	return item, nil, nil
}

// RestoreItemActionV1 is a fake [adapters.RestoreItemActionV1] that counts its calls
// ([RestoreItemActionV1.Calls]). AppliesTo returns Selector unless AppliesToFunc is set;
// Execute returns the input's item unchanged unless ExecuteFunc is set. It is safe for
// concurrent use as long as the funcs are; set the fields before the first call.
type RestoreItemActionV1[R any] struct {
	Selector      adapters.ResourceSelector
	AppliesToFunc func() (adapters.ResourceSelector, error)
	ExecuteFunc   func(in adapters.RestoreItemActionInput[R]) (adapters.RestoreItemActionOutputV1, error)
	calls
}

var _ adapters.RestoreItemActionV1[struct{}] = (*RestoreItemActionV1[struct{}])(nil)

// AppliesTo counts the call and returns AppliesToFunc's answer, or Selector.
func (a *RestoreItemActionV1[R]) AppliesTo() (adapters.ResourceSelector, error) {
	a.count("AppliesTo")
	if a.AppliesToFunc != nil {
		return a.AppliesToFunc()
	}
	return a.Selector, nil
}

// Execute counts the call and returns ExecuteFunc's answer, or the input's item
// unchanged.
func (a *RestoreItemActionV1[R]) Execute(in adapters.RestoreItemActionInput[R]) (adapters.RestoreItemActionOutputV1, error) {
	a.count("Execute")
	if a.ExecuteFunc != nil {
		return a.ExecuteFunc(in)
	}
	return adapters.RestoreItemActionOutputV1{UpdatedItem: in.Item}, nil
}

// VolumeSnapshotterV1 is a fake [adapters.VolumeSnapshotterV1] that counts its calls
// ([VolumeSnapshotterV1.Calls]). Each method answers with its func when set; unset, Init
// and DeleteSnapshot return nil, CreateSnapshot returns "snap-1", "snap-2", ...,
// CreateVolumeFromSnapshot returns "vol-" and the snapshot ID, GetVolumeID returns the
// persistent volume's name, SetVolumeID returns pv unchanged, and GetVolumeInfo returns
// "standard" and no IOPS. It is safe for concurrent use as long as the funcs are; set
// the fields before the first call.
type VolumeSnapshotterV1 struct {
	InitFunc                     func(config map[string]string) error
	CreateVolumeFromSnapshotFunc func(snapshotID, volumeType, volumeAZ string, iops *int64) (string, error)
	GetVolumeIDFunc              func(pv runtime.Unstructured) (string, error)
	SetVolumeIDFunc              func(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error)
	GetVolumeInfoFunc            func(volumeID, volumeAZ string) (string, *int64, error)
	CreateSnapshotFunc           func(volumeID, volumeAZ string, tags map[string]string) (string, error)
	DeleteSnapshotFunc           func(snapshotID string) error
	calls
}

var _ adapters.VolumeSnapshotterV1 = (*VolumeSnapshotterV1)(nil)

// Init counts the call and answers with InitFunc, or nil.
func (s *VolumeSnapshotterV1) Init(config map[string]string) error {
	s.count("Init")
	if s.InitFunc != nil {
		return s.InitFunc(config)
	}
	return nil
}

// CreateVolumeFromSnapshot counts the call and answers with CreateVolumeFromSnapshotFunc,
// or "vol-" and snapshotID.
func (s *VolumeSnapshotterV1) CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (string, error) {
	s.count("CreateVolumeFromSnapshot")
	if s.CreateVolumeFromSnapshotFunc != nil {
		return s.CreateVolumeFromSnapshotFunc(snapshotID, volumeType, volumeAZ, iops)
	}
	return "vol-" + snapshotID, nil
}

// GetVolumeID counts the call and answers with GetVolumeIDFunc, or pv's name.
func (s *VolumeSnapshotterV1) GetVolumeID(pv runtime.Unstructured) (string, error) {
	s.count("GetVolumeID")
	if s.GetVolumeIDFunc != nil {
		return s.GetVolumeIDFunc(pv)
	}
	return itemName(pv), nil
}

// SetVolumeID counts the call and answers with SetVolumeIDFunc, or pv unchanged.
func (s *VolumeSnapshotterV1) SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
	s.count("SetVolumeID")
	if s.SetVolumeIDFunc != nil {
		return s.SetVolumeIDFunc(pv, volumeID)
	}
	return pv, nil
}

// GetVolumeInfo counts the call and answers with GetVolumeInfoFunc, or "standard" and no
// IOPS.
func (s *VolumeSnapshotterV1) GetVolumeInfo(volumeID, volumeAZ string) (string, *int64, error) {
	s.count("GetVolumeInfo")
	if s.GetVolumeInfoFunc != nil {
		return s.GetVolumeInfoFunc(volumeID, volumeAZ)
	}
	return "standard", nil, nil
}

// CreateSnapshot counts the call and answers with CreateSnapshotFunc, or "snap-" and the
// number of the call.
func (s *VolumeSnapshotterV1) CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (string, error) {
	n := s.count("CreateSnapshot")
	if s.CreateSnapshotFunc != nil {
		return s.CreateSnapshotFunc(volumeID, volumeAZ, tags)
	}
	return fmt.Sprintf("snap-%d", n), nil
}

// DeleteSnapshot counts the call and answers with DeleteSnapshotFunc, or nil.
func (s *VolumeSnapshotterV1) DeleteSnapshot(snapshotID string) error {
	s.count("DeleteSnapshot")
	if s.DeleteSnapshotFunc != nil {
		return s.DeleteSnapshotFunc(snapshotID)
	}
	return nil
}

// itemName returns metadata.name of item, or "".
func itemName(item runtime.Unstructured) string {
	if item == nil {
		return ""
	}
	meta, _ := item.UnstructuredContent()["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	return name
}
