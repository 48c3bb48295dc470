package velero_test

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/persistence"
	pluginmocks "github.com/vmware-tanzu/velero/pkg/plugin/mocks"
	objectmocks "github.com/vmware-tanzu/velero/pkg/plugin/velero/mocks"
)

const testBucket = "velero-bucket"

// bucket is the content of a test's object store, by key.
type bucket struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (b *bucket) get(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[key]
	return data, ok
}

// newBackupStore returns Velero's own persistence.BackupStore (what
// NewObjectBackupStoreGetter builds for a backup storage location) over Velero's mocked
// ObjectStore plugin, whose calls read and write the returned bucket. Objects live
// under prefix in the bucket.
func newBackupStore(t *testing.T, prefix string) (persistence.BackupStore, *bucket) {
	t.Helper()
	b := &bucket{objects: map[string][]byte{}}
	store := &objectmocks.ObjectStore{}
	store.On("Init", mock.Anything).Return(nil)
	store.On("PutObject", testBucket, mock.Anything, mock.Anything).Return(func(_, key string, body io.Reader) error {
		data, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.objects[key] = data
		return nil
	})
	store.On("ObjectExists", testBucket, mock.Anything).Return(
		func(_, key string) bool { _, ok := b.get(key); return ok },
		func(_, _ string) error { return nil })
	store.On("GetObject", testBucket, mock.Anything).Return(
		func(_, key string) io.ReadCloser { data, _ := b.get(key); return io.NopCloser(bytes.NewReader(data)) },
		func(_, _ string) error { return nil })

	plugins := &pluginmocks.Manager{}
	plugins.On("GetObjectStore", "memory").Return(store, nil)

	location := builder.ForBackupStorageLocation("velero", "default").Provider("memory").Bucket(testBucket).Prefix(prefix).Result()
	bs, err := persistence.NewObjectBackupStoreGetter(nil).Get(location, plugins, logrus.New())
	require.NoError(t, err)
	return bs, b
}
