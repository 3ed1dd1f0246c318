package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// recordingLeaseStore is a store holding one lease that records the handles
// closed; closing the lease's handle removes the lease.
type recordingLeaseStore struct {
	lease  *wire.Lease
	closed []jsonl.HandleRef
}

func (s *recordingLeaseStore) LeaseOf(context.Context, string) (*wire.Lease, error) {
	return s.lease, nil
}

func (s *recordingLeaseStore) CloseHandle(_ context.Context, ref jsonl.HandleRef) error {
	s.closed = append(s.closed, ref)
	if s.lease != nil && ref.HandleID == s.lease.HandleID {
		s.lease = nil
	}
	return nil
}

// TestUnlockThroughLeaseStore: Unlock needs of a store only its lease and a
// close by reference; it closes exactly the checked handle, with write
// access, once the owner is gone.
func TestUnlockThroughLeaseStore(t *testing.T) {
	lease := &wire.Lease{HandleID: "h-1", Owner: jsonl.Owner{WorkflowID: "session/s1", RunID: "r1"}}
	st := &recordingLeaseStore{lease: lease}
	var rid string
	removed, err := New(describing(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, nil, &rid), Options{}).Unlock(context.Background(), st, "s1")
	require.NoError(t, err)
	require.Equal(t, lease, removed)
	require.Equal(t, []jsonl.HandleRef{{SessionID: "s1", HandleID: "h-1", Access: "write"}}, st.closed)
}
