package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// A write open refused because of a held lease names the owner and how to
// recover.
func TestOpenOfAnOwnedSessionNamesTheOwner(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		owner jsonl.Owner
		want  string
	}{
		{"workflow", jsonl.Owner{WorkflowID: "session/K2", RunID: "run-1"},
			`session "K2" is already owned by an active write handle: its lease is held by workflow "session/K2" run "run-1" (host %q, pid %d, handle "h1", since %s); ` +
				"if that workflow still runs, dispose or cancel it; if it has ended, forfeit the lease with `starter unlock --id K2`"},
		{"process", jsonl.Owner{},
			`session "K2" is already owned by an active write handle: its lease is held by a process without a workflow (host %q, pid %d, handle "h1", since %s); ` +
				"if that process has ended, forfeit the lease with `starter log unlock --id K2 --force`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newActs(t)
			h, err := a.Runtime.Store.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: "K2", CreatedAt: 1}, jsonl.CreateOptions{HandleID: "h1", Owner: c.owner})
			require.NoError(t, err)
			defer h.Close(ctx)
			l, err := a.Runtime.Store.LeaseOf(ctx, "K2")
			require.NoError(t, err)

			_, err = a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "K2", Access: jsonl.AccessWrite, HandleID: "h2"})
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "not an application error: %v", err)
			require.Equal(t, "SessionAlreadyOwned", app.Type())
			require.True(t, app.NonRetryable())
			since := time.UnixMilli(l.AcquiredAt).UTC().Format("2006-01-02T15:04:05Z07:00")
			require.Equal(t, fmt.Sprintf(c.want, l.Host, l.PID, since), app.Message())
			// The type is the whole answer: no cause travels with it.
			require.Nil(t, errors.Unwrap(app))
		})
	}
}
