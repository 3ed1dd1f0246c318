package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// OwnedText is the refusal of a write open because session id's lease is
// held: the store's reference text, then the owner the lease names and how
// to recover. A lease held by a workflow is released by disposing or
// cancelling that workflow while it runs, or forfeited with `starter unlock`
// (which checks through Temporal that the owner is not running) once it is
// gone; a lease held by a process without a workflow (an offline `starter
// log` command) is forfeited with `starter log unlock --force` once that
// process is gone.
func OwnedText(id string, l *wire.Lease) string {
	msg := fmt.Sprintf("session %q is already owned by an active write handle", id)
	if l == nil {
		return msg
	}
	acquired := time.UnixMilli(l.AcquiredAt).UTC().Format(time.RFC3339)
	if l.Owner.WorkflowID != "" {
		return fmt.Sprintf("%s: its lease is held by workflow %q run %q (host %q, pid %d, handle %q, since %s); "+
			"if that workflow still runs, dispose or cancel it; if it has ended, forfeit the lease with `starter unlock --id %s`",
			msg, l.Owner.WorkflowID, l.Owner.RunID, l.Host, l.PID, l.HandleID, acquired, quoteArg(id))
	}
	return fmt.Sprintf("%s: its lease is held by a process without a workflow (host %q, pid %d, handle %q, since %s); "+
		"if that process has ended, forfeit the lease with `starter log unlock --id %s --force`",
		msg, l.Host, l.PID, l.HandleID, acquired, quoteArg(id))
}

// quoteArg quotes a command-line argument for a POSIX shell when it needs
// it.
func quoteArg(s string) string {
	safe := func(r rune) bool {
		return r == '-' || r == '_' || r == '.' || r == '/' || r == ':' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	}
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !safe(r) }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ownedError is err, an open's failure, with the lease's owner named when
// the session is already owned.
func ownedError(ctx context.Context, st *jsonl.Store, id string, err error) error {
	if !errors.Is(err, wire.ErrAlreadyOwned) {
		return MapError(err)
	}
	l, lerr := st.LeaseOf(context.WithoutCancel(ctx), id)
	if lerr != nil || l == nil {
		return MapError(err)
	}
	return temporal.NewNonRetryableApplicationError(OwnedText(id, l), string(jsonl.CodeAlreadyOwned), nil)
}
