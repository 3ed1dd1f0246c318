package jsonl_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// A write open retried on another store instance (a worker retrying an
// open whose first attempt took the lease but whose answer was lost) gets
// the session with the same handle id; another handle id is refused.
func TestRetriedWriteOpenKeepsItsLease(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	first := durStore(t, root, jsonl.CompressionNone, nil)
	h, err := first.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "creator"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, durSeqEvents(t, 0, 2)))
	require.NoError(t, h.Close(ctx))

	_, err = first.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "w1"})
	require.NoError(t, err)

	retry := durStore(t, root, jsonl.CompressionNone, nil)
	again, err := retry.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "w1"})
	require.NoError(t, err)
	require.Equal(t, int64(2), again.NextSeq())

	_, err = durStore(t, root, jsonl.CompressionNone, nil).Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "w2"})
	require.Error(t, err)
	require.Equal(t, jsonl.Code("SessionAlreadyOwned"), jsonl.ErrorCode(err))
}

// A write open with another handle id, refused while the in-process writer
// holds the lease, leaves that writer working.
func TestRefusedWriteOpenLeavesTheWriter(t *testing.T) {
	ctx := context.Background()
	s := durStore(t, t.TempDir(), jsonl.CompressionNone, nil)
	h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "w1"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, durSeqEvents(t, 0, 2)))

	_, err = s.Open(ctx, durID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: "w2"})
	require.Error(t, err)
	require.Equal(t, jsonl.Code("SessionAlreadyOwned"), jsonl.ErrorCode(err))

	require.NoError(t, h.Append(ctx, durSeqEvents(t, 2, 2)))
	require.Equal(t, int64(4), h.NextSeq())
	require.NoError(t, h.Close(ctx))
}
