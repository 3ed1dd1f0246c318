package client

import "github.com/sessionflow/sessionflow/wire"

// checkIdentity refuses, before anything reaches Temporal, a session id the
// workflows would refuse at once: one the store cannot hold (its encoded
// directory name exceeds wire.MaxSegmentBytes). The error is of the
// workflows' type InvalidArgument (ErrInvalidArgument), with their message,
// the limit in it; it wraps wire.ErrIDTooLong.
func checkIdentity(id string) error {
	if err := wire.CheckSessionIdentity(wire.WorkflowID(id), id); err != nil {
		return &Error{Type: wire.ErrTypeInvalidArgument, Message: err.Error(), SessionID: id, Err: err}
	}
	return nil
}
