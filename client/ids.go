package client

import "github.com/sessionflow/sessionflow/workflows"

// checkIdentity refuses, before anything reaches Temporal, a session id the
// workflows would refuse at once: one the store cannot hold (its encoded
// directory name exceeds jsonl.MaxSegmentBytes). The error is the
// workflows' own InvalidArgument (ErrInvalidArgument), with the limit in the
// message.
func checkIdentity(id string) error {
	return callError("start", id, workflows.CheckSessionIdentity(workflows.WorkflowID(id), id))
}
