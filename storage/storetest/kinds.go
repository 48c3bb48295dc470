package storetest

import (
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// ownKind returns an owner of a kind of one's own (see phase.Declare).
func ownKind(kind phase.Kind, name string) operations.Owner {
	return operations.Owner{Kind: kind, Name: name, UID: "uid-" + string(kind) + "-" + name}
}

// declare returns the profile of kind following base, as phase.Declare does.
func declare(t tb, kind, base phase.Kind, opts ...phase.Option) phase.Profile {
	t.Helper()
	p, err := phase.Declare(kind, base, opts...)
	noError(t, err, "phase.Declare(%s, %s)", kind, base)
	return p
}

// testOwnKinds checks runs of kinds of one's own beside Backup and Restore runs of the
// same names: each is a run of its own, with its profile kept; they list after Restore,
// by kind name (byte order), by phase and by kind; updates move them along their base's
// machine; operations and deletes touch only their own run. The kinds' names are each
// other's prefixes ("DB", "DBX") and one is a single letter ("B").
func testOwnKinds(t tb, s operations.Store) {
	var (
		snapshot = declare(t, "DatabaseSnapshot", phase.Backup, phase.WithQueue())
		db       = declare(t, "DB", phase.Restore, phase.WithRestoreFinalizing())
		dbx      = declare(t, "DBX", phase.Backup)
		b        = declare(t, "B", phase.Restore)
		// A kind of the fewest phases (see phase.WithPhases): backup-like, but with no
		// Finalizing and no Deleting.
		migration = declare(t, "Migration", phase.Backup, phase.WithPhases(phase.New, phase.InProgress,
			phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed,
			phase.Completed, phase.PartiallyFailed, phase.Failed))
	)
	names := []string{"a", "a0", "b"}
	// In listing order, each kind's runs in phases of their own.
	var all []operations.Run
	add := func(o operations.Owner, p phase.Phase, profile phase.Profile) operations.Run {
		r := runIn(t, o, p, profile)
		r.ItemsTotal, r.Errors = len(all), len(o.Name)
		all = append(all, r)
		return r
	}
	for _, n := range names {
		add(backup(n), phase.WaitingForPluginOperations, phase.Profile{})
	}
	for _, n := range names {
		add(restore(n), phase.Completed, phase.Profile{})
	}
	for _, k := range []struct {
		kind    phase.Kind
		profile phase.Profile
		in      phase.Phase
	}{
		{"B", b, phase.WaitingForPluginOperationsPartiallyFailed},
		{"DB", db, phase.FinalizingPartiallyFailed},
		{"DBX", dbx, phase.WaitingForPluginOperations},
		{"DatabaseSnapshot", snapshot, phase.Queued},
		{"Migration", migration, phase.New},
	} {
		for _, n := range names {
			add(ownKind(k.kind, n), k.in, k.profile)
		}
	}
	// Created kinds last first, names last first, so that no order comes from creation.
	for i := len(all) - 1; i >= 0; i-- {
		mustCreate(t, s, all[i].Clone())
	}
	for _, r := range all {
		wantRun(t, s, r)
	}
	runsOf := func(kinds ...phase.Kind) []operations.Run {
		var out []operations.Run
		for _, r := range all {
			for _, k := range kinds {
				if r.Owner.Kind == k {
					out = append(out, r)
				}
			}
		}
		return out
	}
	waiting := []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}
	for _, tc := range []struct {
		name   string
		filter operations.RunFilter
		want   []operations.Run
	}{
		{"every run", operations.RunFilter{}, all},
		{"one kind", operations.RunFilter{Kind: "DB"}, runsOf("DB")},
		{"a kind whose name is another's prefix", operations.RunFilter{Kind: "DBX"}, runsOf("DBX")},
		{"a single-letter kind", operations.RunFilter{Kind: "B"}, runsOf("B")},
		{"Backup beside a kind named B", operations.RunFilter{Kind: phase.Backup}, runsOf(phase.Backup)},
		{"waiting, every kind", operations.RunFilter{Phases: waiting}, runsOf(phase.Backup, "B", "DBX")},
		{"waiting of one kind", operations.RunFilter{Kind: "DBX", Phases: waiting}, runsOf("DBX")},
		{"Queued", operations.RunFilter{Phases: []phase.Phase{phase.Queued}}, runsOf("DatabaseSnapshot")},
		{"a kind no run has", operations.RunFilter{Kind: "Schedule"}, nil},
		{"a kind no run has, by phase", operations.RunFilter{Kind: "DBY", Phases: waiting}, nil},
		{"a kind that is no name", operations.RunFilter{Kind: "D B"}, nil},
	} {
		t.Run("List/"+tc.name, func(t tb) { wantRuns(t, s, tc.filter, tc.want) })
	}

	// The same operation IDs in runs of the same name, one of each kind.
	putOps := map[operations.Owner][]operations.Operation{}
	t.Run("Operations", func(t tb) {
		for i, r := range all {
			if r.Owner.Name != "a" || phase.IsTerminal(r.Phase) {
				continue
			}
			ops := newOps(r.Owner, "op-", 2+i%3, operations.OperationInProgress)
			mustPut(t, s, r.Owner, cloneOps(ops))
			putOps[r.Owner] = ops
		}
		for o, ops := range putOps {
			wantAllOps(t, s, o, ops)
		}
	})

	t.Run("Update", func(t tb) {
		// Along the base's machine, with the profile kept and the index following.
		o := ownKind("DBX", "a")
		got, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
			return r.SetPhase(phase.Completed, "operations ended", at(5))
		})
		noError(t, err, "UpdateRun(%s) to Completed", o)
		wantEqual(t, []phase.Phase{phase.Finalizing, phase.Completed}, []phase.Phase{got.History[len(got.History)-2].To, got.History[len(got.History)-1].To}, "the phases UpdateRun(%s) went through", o)
		wantEqual(t, dbx, got.Profile, "the profile of %s after UpdateRun", o)
		wantRun(t, s, got)
		wantRuns(t, s, operations.RunFilter{Kind: "DBX", Phases: waiting}, runsOf("DBX")[1:])
		wantRuns(t, s, operations.RunFilter{Kind: "DBX", Phases: []phase.Phase{phase.Completed}}, []operations.Run{got})

		// A kind of its own phases follows them: from New straight to Completed, with
		// no Finalizing, though it is backup-like.
		mb := ownKind("Migration", "b")
		got, err = s.UpdateRun(bg, mb, func(r *operations.Run) error {
			return r.SetPhase(phase.Completed, "nothing to wait for", at(5))
		})
		noError(t, err, "UpdateRun(%s) to Completed", mb)
		var through []phase.Phase
		for _, h := range got.History {
			through = append(through, h.To)
		}
		wantEqual(t, []phase.Phase{phase.InProgress, phase.Completed}, through[len(through)-2:], "the phases UpdateRun(%s) went through", mb)
		wantEqual(t, migration, got.Profile, "the profile of %s after UpdateRun", mb)
		wantRun(t, s, got)

		// A kind without Deleting among its phases cannot go there; a backup-like one has it.
		m := ownKind("Migration", "a")
		_, err = s.UpdateRun(bg, m, func(r *operations.Run) error {
			forcePhase(r, phase.Deleting)
			return nil
		})
		wantError(t, err, phase.ErrUnknownPhase, "UpdateRun(%s) to Deleting", m)
		_, err = s.UpdateRun(bg, o, func(r *operations.Run) error { return r.SetPhase(phase.Deleting, "deleted", at(6)) })
		noError(t, err, "UpdateRun(%s) to Deleting", o)

		// The profile cannot be dropped: it declares the kind.
		_, err = s.UpdateRun(bg, m, func(r *operations.Run) error {
			r.Profile = phase.Profile{}
			return nil
		})
		wantError(t, err, operations.ErrConflict, "UpdateRun(%s) dropping its profile", m)
	})

	t.Run("CreateUndeclared", func(t tb) {
		for _, r := range []operations.Run{
			newRun(ownKind("Schedule", "a")), // no profile
			{Owner: ownKind("Schedule", "b"), Phase: phase.New, Profile: phase.Profile{Queue: true}}, // a profile without a base
		} {
			err := s.CreateRun(bg, r)
			wantError(t, err, operations.ErrInvalid, "CreateRun(%s) without a declared profile", r.Owner)
			wantError(t, err, phase.ErrUnknownKind, "CreateRun(%s) without a declared profile", r.Owner)
			_, err = s.GetRun(bg, r.Owner)
			wantError(t, err, operations.ErrNotFound, "GetRun(%s) after a refused CreateRun", r.Owner)
		}
	})

	t.Run("Delete", func(t tb) {
		for _, kind := range []phase.Kind{"DB", phase.Backup, "DatabaseSnapshot"} {
			o := operations.Owner{Kind: kind, Name: "a"}
			noError(t, s.DeleteRun(bg, o), "DeleteRun(%s)", o)
			_, err := s.GetRun(bg, o)
			wantError(t, err, operations.ErrNotFound, "GetRun(%s) after DeleteRun", o)
			_, err = s.ListOperations(bg, o, operations.OperationFilter{})
			wantError(t, err, operations.ErrNotFound, "ListOperations(%s) after DeleteRun", o)
		}
		left, err := s.ListRuns(bg, operations.RunFilter{})
		noError(t, err, "ListRuns after DeleteRun")
		var got []string
		for _, r := range left {
			got = append(got, r.Owner.String())
		}
		var want []string
		for _, r := range all {
			switch r.Owner.String() {
			case "DB/a", "Backup/a", "DatabaseSnapshot/a":
			default:
				want = append(want, r.Owner.String())
			}
		}
		wantEqual(t, want, got, "the runs left after deleting three runs named a")
		for _, o := range []operations.Owner{ownKind("DBX", "a"), ownKind("B", "a"), restore("a")} {
			_, err := s.GetRun(bg, o)
			noError(t, err, "GetRun(%s) after deleting runs of other kinds of its name", o)
		}
		for _, o := range []operations.Owner{ownKind("DBX", "a"), ownKind("B", "a")} {
			wantAllOps(t, s, o, putOps[o])
		}
	})
}
