package phase

import (
	"context"
	"testing"

	"github.com/looplab/fsm"
)

// lifecycle is a backup's longest successful path; each benchmark iteration fires all of
// it and then puts the machine back in New, the same way for both implementations.
var lifecycle = []Event{EventStart, EventWait, EventFinalize, EventComplete, EventDelete}

// BenchmarkFire compares Machine.Fire with a bare looplab/fsm Event on the same
// transition table. One op is the five events of lifecycle plus one SetState.
func BenchmarkFire(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=itemops", func(b *testing.B) {
		m, err := NewMachine(Backup, New)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, e := range lifecycle {
				if err := m.Fire(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			m.fsm.SetState(string(New))
		}
	})
	b.Run("impl=looplab", func(b *testing.B) {
		f := fsm.NewFSM(string(New), definitions[0].from[New.index()], nil)
		names := make([]string, len(lifecycle))
		for i, e := range lifecycle {
			names[i] = string(e)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, e := range names {
				if err := f.Event(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			f.SetState(string(New))
		}
	})
}

// BenchmarkFireInvalid measures a refused event, which builds a *TransitionError.
func BenchmarkFireInvalid(b *testing.B) {
	ctx := context.Background()
	m, err := NewMachine(Backup, Completed)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m.Fire(ctx, EventStart) == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkNewMachine builds a machine from a stored phase, as a store or controller does
// for every record it loads, and then fires one event, beside a bare fsm.NewFSM given
// the whole transition table and one Event. A Machine builds its fsm on the first Fire,
// with only the transitions still ahead of its phase, so building alone costs the check
// of the phase, and building and firing costs what looplab charges for that smaller
// table.
func BenchmarkNewMachine(b *testing.B) {
	ctx := context.Background()
	starts := []struct {
		phase Phase
		next  Event
	}{
		{New, EventQueue},
		{InProgress, EventWait},
		{WaitingForPluginOperations, EventFinalize},
		{Completed, EventDelete},
	}
	for _, st := range starts {
		b.Run("impl=itemops/op=new/start="+string(st.phase), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := NewMachine(Backup, st.phase, WithQueue()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl=itemops/op=new+fire/start="+string(st.phase), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m, err := NewMachine(Backup, st.phase, WithQueue())
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Fire(ctx, st.next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("impl=looplab/op=new+fire/start=New", func(b *testing.B) {
		table := definitions[1].from[New.index()]
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			f := fsm.NewFSM(string(New), table, nil)
			if err := f.Event(ctx, string(EventQueue)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPath measures the check a store makes on every phase change.
func BenchmarkPath(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Path(Backup, WaitingForPluginOperations, FinalizingPartiallyFailed); err != nil {
			b.Fatal(err)
		}
	}
}
