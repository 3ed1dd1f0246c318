package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// Search attributes of session workflows (all Keyword). When
// Options.SearchAttributes is set the workflow records SessionId, SessionCwd
// (once the header is known) and SessionPhase at every phase change. They must be
// registered in the namespace (the embedded dev server registers them; a
// cluster registers them once, e.g. `temporal operator search-attribute
// create --name SessionPhase --type Keyword`).
var (
	SearchAttributeSessionID    = temporal.NewSearchAttributeKeyKeyword(wire.SearchAttributeSessionID)
	SearchAttributeSessionPhase = temporal.NewSearchAttributeKeyKeyword(wire.SearchAttributeSessionPhase)
	SearchAttributeSessionCwd   = temporal.NewSearchAttributeKeyKeyword(wire.SearchAttributeSessionCwd)
)

// phaseSearchAttributeChange names the versioned change that introduced the
// SessionPhase upserts.
const phaseSearchAttributeChange = "session-phase-search-attribute"

// setPhase moves the lifecycle to phase p and, when the request asked for
// search attributes, records it (with the session id and cwd). The upserts are gated by
// GetVersion so runs recorded before them replay unchanged.
func (l *lifecycle) setPhase(p Phase) {
	l.phase = p
	if l.options == nil || !l.options.SearchAttributes {
		return
	}
	if !l.phaseChange.takenIn(l.dctx, phaseSearchAttributeChange) {
		return
	}
	updates := []temporal.SearchAttributeUpdate{
		SearchAttributeSessionID.ValueSet(l.id),
		SearchAttributeSessionPhase.ValueSet(string(p)),
	}
	if l.header.Cwd != "" {
		updates = append(updates, SearchAttributeSessionCwd.ValueSet(l.header.Cwd))
	}
	if err := workflow.UpsertTypedSearchAttributes(l.dctx, updates...); err != nil {
		workflow.GetLogger(l.dctx).Warn("search attribute upsert failed", "session", l.id, "phase", p, "error", err)
	}
}
