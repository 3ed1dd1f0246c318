package workflows

import (
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The requests the workflows decode: the contract's requests (package wire)
// over the store's strict event type, session.Event, so that the events of
// a request are checked as they are decoded. A client sends the same JSON
// in the contract's plain form (docs/DECISIONS.md D83).
type (
	// CreateSessionRequest is the argument of CreateSession.
	CreateSessionRequest = wire.CreateSessionRequestOf[session.Event]
	// AppendRequest is the argument of the Append update.
	AppendRequest = wire.AppendRequestOf[session.Event]
	// SetupResult is the result of a setup hook.
	SetupResult = wire.SetupResultOf[session.Event]
	// StartRequest is the argument of a SessionLoop's Start update.
	StartRequest = wire.StartRequestOf[session.Event]
)
