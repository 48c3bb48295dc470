package boltstore

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// checkInvariants reports every way the file breaks bbolt's consistency check or the
// store's own rules: each run indexed once under its phase and nothing else in the
// run-phases index, each operations bucket belonging to a run, and in each of them every
// record in the bucket of its phase and the ID index matching the records exactly.
func checkInvariants(s *Store) error {
	return s.db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, fmt.Errorf("bbolt check: %w", err))
		}
		runs := tx.Bucket(bucketRuns)
		idx := tx.Bucket(bucketRunPhases)
		nRuns := 0
		err := runs.ForEach(func(k, v []byte) error {
			nRuns++
			r, err := decodeRunAt(k, v)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			if idx.Get(phaseKey(r.Phase, k)) == nil {
				errs = append(errs, fmt.Errorf("run %s (%s) is not in the phase index", r.Owner, r.Phase))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n := idx.Stats().KeyN; n != nRuns {
			errs = append(errs, fmt.Errorf("phase index has %d entries for %d runs", n, nRuns))
		}
		err = tx.Bucket(bucketOps).ForEachBucket(func(rk []byte) error {
			if runs.Get(rk) == nil {
				errs = append(errs, fmt.Errorf("operations bucket %q has no run", rk))
			}
			o, err := ownerOf(rk)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			b, _, err := openRunOps(tx, rk)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			nRecords := 0
			for _, rb := range []struct {
				b          *bolt.Bucket
				unfinished bool
			}{{b.unfinished, true}, {b.finished, false}} {
				err := rb.b.ForEach(func(k, v []byte) error {
					nRecords++
					op, err := decodeOperation(o, v)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s seq %x: %w", o, k, err))
						return nil
					}
					code := phaseCode(op.Status.Phase)
					if unfinishedCode(code) != rb.unfinished {
						errs = append(errs, fmt.Errorf("%s: %s operation %q is in the wrong bucket", o, op.Status.Phase, op.ID))
					}
					if got, want := b.ids.Get([]byte(op.ID)), append(bytes.Clone(k), code); !bytes.Equal(got, want) {
						errs = append(errs, fmt.Errorf("%s: ids[%q] = %x, want %x", o, op.ID, got, want))
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if n := b.ids.Stats().KeyN; n != nRecords {
				errs = append(errs, fmt.Errorf("%s: %d IDs for %d records", o, n, nRecords))
			}
			if seq := b.bucket.Sequence(); uint64(nRecords) > seq {
				errs = append(errs, fmt.Errorf("%s: %d records but the sequence is at %d", o, nRecords, seq))
			}
			return nil
		})
		if err != nil {
			return err
		}
		return errors.Join(errs...)
	})
}
