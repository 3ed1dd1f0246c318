package workflows

import (
	"go.temporal.io/sdk/temporal"

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
