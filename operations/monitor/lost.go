package monitor

import (
	"sync"

	"github.com/itemops/itemops/operations"
)

// lostWrites keeps, for the operations of each run whose last write failed, the Monitor
// state that the write was to record, so that the next check of such an operation starts
// from what the Monitor saw rather than from the older state the store still holds: an
// answer that a failed write did not record still ends a row of errors, and an error it
// did not record still counts in the row. A write whose answer was lost may have been
// applied, so a kept state is used only while the store holds the state the write
// started from; once it holds anything else (the write was applied, or another Monitor
// wrote), the store is right. The zero lostWrites is empty and ready to use, and it is
// safe for concurrent use.
//
// What is kept lives in the Monitor's memory: a Monitor that takes a run over from
// another, or a new one after a restart, counts from the store. What is kept of a run
// goes at its next poll whose write succeeds; that of a run deleted before then stays,
// one state per operation of the run.
type lostWrites struct {
	mu   sync.Mutex
	runs map[runKey]map[string]lostWrite // by run, then by operation ID
}

// A lostWrite is the Monitor state of an operation before a failed write (as the store
// held it) and after (as the write was to record it).
type lostWrite struct{ from, to operations.MonitorState }

// recall sets the Monitor state of each of ops, the unfinished operations of run k as the
// store lists them, to the state a failed write was to record, when the store still holds
// the state that write started from. It returns the states the store holds of the
// operations it set, by their index in ops; nil when it set none.
func (l *lostWrites) recall(k runKey, ops []operations.Operation) map[int]operations.MonitorState {
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := l.runs[k]
	if len(lost) == 0 {
		return nil
	}
	var stored map[int]operations.MonitorState
	for i := range ops {
		ms := &ops[i].Monitor
		if w, ok := lost[ops[i].ID]; ok && w.from == *ms && w.to != *ms {
			if stored == nil {
				stored = make(map[int]operations.MonitorState)
			}
			stored[i], *ms = *ms, w.to
		}
	}
	return stored
}

// written records how the last write of run k ended: when it failed (err is not nil),
// lost holds, by ID, what it was to record of each operation left unfinished, and of
// each that a retry bound failed the state its last error left; else nothing is kept for
// the run any more.
func (l *lostWrites) written(k runKey, lost map[string]lostWrite, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil || len(lost) == 0 {
		delete(l.runs, k)
		return
	}
	if l.runs == nil {
		l.runs = make(map[runKey]map[string]lostWrite)
	}
	l.runs[k] = lost
}
