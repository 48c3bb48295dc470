// Package kv is the storage engine of itemops: it implements the operations.Store
// contract once, over a small transactional key-value [Backend] that each storage driver
// provides (storage/memstore, storage/boltstore, storage/etcdstore).
package kv
