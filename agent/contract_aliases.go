package agent

import (
	"github.com/sessionflow/sessionflow/wire"
)

// The declarations below moved to package wire, the contract between the
// workflows and their clients (docs/DECISIONS.md D83). These aliases keep
// this package's code and its callers compiling unchanged; unalias.sh
// rewrites their uses to wire's names and deletes this file.

// CallModelActivity is wire.CallModelActivity.
const CallModelActivity = wire.CallModelActivity

// RunToolActivity is wire.RunToolActivity.
const RunToolActivity = wire.RunToolActivity

// EndTurnActivity is wire.EndTurnActivity.
const EndTurnActivity = wire.EndTurnActivity

// CloseCallsActivity is wire.CloseCallsActivity.
const CloseCallsActivity = wire.CloseCallsActivity

// ErrTypeProviderRefused is wire.ErrTypeProviderRefused.
const ErrTypeProviderRefused = wire.ErrTypeProviderRefused

// ErrTypeProviderUnavailable is wire.ErrTypeProviderUnavailable.
const ErrTypeProviderUnavailable = wire.ErrTypeProviderUnavailable

// ErrTypeUnknownProvider is wire.ErrTypeUnknownProvider.
const ErrTypeUnknownProvider = wire.ErrTypeUnknownProvider

// ErrTypeInvalidLog is wire.ErrTypeInvalidLog.
const ErrTypeInvalidLog = wire.ErrTypeInvalidLog

// CodeAbortedBeforeDispatch is wire.CodeAbortedBeforeDispatch.
const CodeAbortedBeforeDispatch = wire.CodeAbortedBeforeDispatch

// CodeMaxTokensNotRun is wire.CodeMaxTokensNotRun.
const CodeMaxTokensNotRun = wire.CodeMaxTokensNotRun

// ModelProgress is wire.ModelProgress.
type ModelProgress = wire.ModelProgress
