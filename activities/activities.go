// Package activities holds sessionflow's Temporal activities over a
// *jsonl.Store: create, open, read, repair, append, seed, flush, close and
// stat of session handles; and the Runtime every activity of a worker
// shares, these and the agent's (package agent): the store, the heartbeat
// and the classification of errors (MapError).
//
// Every activity is idempotent under retry (LIFECYCLE.md §4 step 2,
// FORMAT.md §6.1): handle ids are chosen by the calling workflow, so a
// retried create or open returns the handle the first attempt took, a
// retried append of a batch that already landed succeeds without writing, a
// retried repair finds its marker last and appends nothing, and closing is
// idempotent. Named store errors become non-retryable application errors
// whose type is the error's code (FORMAT.md §7.1); transient I/O errors stay
// retryable. Activities that read a log heartbeat while they read, and never
// return events through history except a bounded batch given to them.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 4. It
// may import wire, internal/lib/..., session and the packages of row 3 (jsonl,
// livetext, provider, tool and theirs); not agent, workflows, client or
// anything above.
package activities

import (
	sdkclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/jsonl"
)

// PersistenceNotConfiguredText is the error text of a resume without a
// persistence backend (LIFECYCLE.md §12).
const PersistenceNotConfiguredText = "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)"

// DefaultReadChunk is how many events a reading activity takes per store read
// (and per heartbeat opportunity).
const DefaultReadChunk = 1 << 16

// Activities are sessionflow's store activities over the store of their
// Runtime. Register a pointer with a worker; the method names are the
// activity names.
type Activities struct {
	// Runtime holds the store and the heartbeat the activities share with
	// the agent's. A nil Runtime, or one without a store, makes every
	// activity fail with ErrTypePersistenceNotConfigured.
	Runtime *Runtime
	// ReadChunk is the number of events read per store call; zero means
	// DefaultReadChunk.
	ReadChunk int64
	// Temporal is the client ForfeitDeadOwner asks whether a lease's owning
	// workflow still runs. Without it ForfeitDeadOwner keeps every lease.
	Temporal sdkclient.Client
}

func (a *Activities) chunk() int64 {
	if a.ReadChunk > 0 {
		return a.ReadChunk
	}
	return DefaultReadChunk
}

// runtime is a's runtime, nil for a nil a.
func (a *Activities) runtime() *Runtime {
	if a == nil {
		return nil
	}
	return a.Runtime
}

func (a *Activities) store() (*jsonl.Store, error) {
	return a.runtime().Sessions()
}
