package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// StoreSeed refuses a fork count outside the safe integers before reading
// the parent, and a count inside them that the parent cannot serve after.
func TestStoreSeedCountRange(t *testing.T) {
	a := newActs(t)
	ctx := context.Background()
	seedSession(t, a, "p", []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1})})
	info, err := a.CreateHandle(ctx, activities.CreateHandleInput{
		Header: wire.Header{ID: "k", CreatedAt: 1, IsSeeded: true, ParentSession: "p"}, HandleID: "w", InheritedEventCount: 1})
	require.NoError(t, err)
	cases := map[int64]string{
		-1:        "fork count must be a non-negative safe integer, got -1",
		1 << 53:   "fork count must be a non-negative safe integer, got 9007199254740992",
		1<<53 - 1: `fork of "p" needs 9007199254740991 events, the parent has 1`,
		2:         `fork of "p" needs 2 events, the parent has 1`,
	}
	for count, want := range cases {
		_, err := a.StoreSeed(ctx, activities.StoreSeedInput{Ref: info.Ref, ParentSessionID: "p", Count: count, Now: 9})
		requireInvalid(t, err, want)
	}
	require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
}
