package wire

// Application error types of the agent activities (besides the store's
// codes, see activities.MapError).
const (
	// ErrTypeProviderRefused is the non-retryable error of a model call the
	// provider refused; its details hold the *provider.Error. The turn ends
	// "error".
	ErrTypeProviderRefused = "ProviderRefused"
	// ErrTypeProviderUnavailable is the retryable error of a model call that
	// may succeed when made again (rate limit, server error, a cut stream);
	// its next retry waits for the provider's RetryAfter when it gave one.
	ErrTypeProviderUnavailable = "ProviderUnavailable"
	// ErrTypeUnknownProvider is the non-retryable error of a model call
	// naming a provider the worker does not offer.
	ErrTypeUnknownProvider = "UnknownProvider"
	// ErrTypeInvalidLog is the non-retryable error of an activity whose
	// input does not match the log (no such message or call at the seqs it
	// names).
	ErrTypeInvalidLog = "InvalidLog"
)

// Tool-result codes of the agent activities.
const (
	// CodeAbortedBeforeDispatch is the code of the result EndTurn stores
	// for a call the turn never dispatched.
	CodeAbortedBeforeDispatch = "ABORTED_BEFORE_DISPATCH"
)

// CodeMaxTokensNotRun is the code of the result stored for a tool call of a
// model response that finished at its token limit (D35: such calls are
// never run, their arguments may be cut off).
const CodeMaxTokensNotRun = "MAX_TOKENS_NOT_RUN"

// Application error types produced here besides the store's codes
// (jsonl.Code values such as "SessionNotFound").
const (
	// ErrTypeIO is the type of a retryable transient I/O error.
	ErrTypeIO = "IOError"
	// ErrTypePersistenceNotConfigured is the type of every activity's error
	// when the worker runs without a store.
	ErrTypePersistenceNotConfigured = "PersistenceNotConfigured"
)

// Retryable reports whether an activity failure of application error type
// errType is retried by Temporal: only a transient I/O error (ErrTypeIO) and
// an unavailable provider (ErrTypeProviderUnavailable). Every other type
// of this package (the store's codes, InvalidArgument, the workflows'
// refusals) is raised non-retryable: the same request fails the same way.
func Retryable(errType string) bool {
	return errType == ErrTypeIO || errType == ErrTypeProviderUnavailable
}
