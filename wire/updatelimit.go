package wire

// Update input limits (docs/API.md: Update input limit).
//
// The Temporal SDKs echo an update's whole request into the workflow's
// answer to it (the Acceptance or Rejection protocol message), and the
// server terminates a workflow whose answer is larger than its blob size
// limit (limit.blobSize.error, 2 MiB by default) as
// BadUpdateWorkflowExecutionMessage. No workflow code runs between the
// request and that echo, so the limit is kept before the request reaches
// the workflow: by the server, which refuses to admit an update while the
// payloads of a workflow's updates in flight would reach
// history.maxInFlightUpdatePayloads (InFlightUpdateBytes in every server
// sessionflow ships), and by the Go client, which refuses a larger input
// before sending it.
const (
	// MaxUpdateInputBytes is the largest encoded input (the payload's data,
	// JSON) of one update the Go client sends to a session or a loop.
	MaxUpdateInputBytes = 1280 << 10 // 1.25 MiB

	// InFlightUpdateBytes is the value of the server's dynamic config
	// history.maxInFlightUpdatePayloads that the dev server, the compose
	// stack and the cluster run with: the server refuses an update while
	// the requests of the workflow's admitted, uncompleted updates and this
	// one would reach it. It leaves room below the server's 2 MiB blob
	// limit for an answer's own fields (ids and a bounded failure).
	InFlightUpdateBytes = 1536 << 10 // 1.5 MiB

	// InFlightUpdateConfigKey is the dynamic config key that sets
	// InFlightUpdateBytes.
	InFlightUpdateConfigKey = "history.maxInFlightUpdatePayloads"
)
