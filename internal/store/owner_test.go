package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/erpsync/erpsync/internal/store"
)

// TestClaimTableAtOnce claims tables from many goroutines at once, each
// round a fresh table, half the claimants of one job and half each of its
// own: exactly one job owns the table, every claimant of that job is let
// through and every other one is refused with the owner's name.
func TestClaimTableAtOnce(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	const claimants = 24
	for round := range 8 {
		table := fmt.Sprintf("table_%d", round)
		jobs := make([]string, claimants)
		for i := range jobs {
			jobs[i] = "shared"
			if i%2 == 1 {
				jobs[i] = fmt.Sprintf("job-%d", i)
			}
		}
		errs := make([]error, claimants)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claimants {
			wg.Go(func() {
				<-start
				errs[i] = s.ClaimTable(ctx, table, jobs[i])
			})
		}
		close(start)
		wg.Wait()
		owner, ok, err := s.TableOwner(ctx, table)
		if err != nil || !ok {
			t.Fatalf("%s: owner %+v, %v, %v", table, owner, ok, err)
		}
		for i, err := range errs {
			var oe *store.OwnedError
			switch {
			case jobs[i] == owner.Job && err != nil:
				t.Errorf("%s: claimant %d of the owner %q refused: %v", table, i, owner.Job, err)
			case jobs[i] != owner.Job && !errors.As(err, &oe):
				t.Errorf("%s: claimant %d of job %q, with %q the owner: %v, want an OwnedError", table, i, jobs[i], owner.Job, err)
			case jobs[i] != owner.Job && (oe.Owner.Job != owner.Job || oe.Job != jobs[i] || oe.Table != table || !errors.Is(err, store.ErrOwned)):
				t.Errorf("%s: claimant %d: %+v", table, i, oe)
			}
		}
	}
}

// TestTakeTable hands a table from one job to another: the new owner's
// claims pass, the old one's are refused, and a take of a table nobody
// owns reports no previous owner.
func TestTakeTable(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	if prev, ok, err := s.TakeTable(ctx, store.MembershipsTable, "a"); err != nil || ok {
		t.Fatalf("take an unowned table: previous %+v (%v), %v", prev, ok, err)
	}
	if err := s.ClaimTable(ctx, store.MembershipsTable, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimTable(ctx, store.MembershipsTable, "b"); !errors.Is(err, store.ErrOwned) {
		t.Fatalf("claim of job b: %v, want refused", err)
	}
	before, _, _ := s.TableOwner(ctx, store.MembershipsTable)
	prev, ok, err := s.TakeTable(ctx, store.MembershipsTable, "b")
	if err != nil || !ok || prev.Job != "a" {
		t.Fatalf("take by b: previous %+v (%v), %v", prev, ok, err)
	}
	if err := s.ClaimTable(ctx, store.MembershipsTable, "b"); err != nil {
		t.Fatalf("claim of the new owner: %v", err)
	}
	err = s.ClaimTable(ctx, store.MembershipsTable, "a")
	var oe *store.OwnedError
	if !errors.As(err, &oe) || oe.Owner.Job != "b" || oe.Owner.ClaimedAt.Before(before.ClaimedAt) {
		t.Fatalf("claim of the old owner: %v, want refused, owned by b since the take", err)
	}
}
