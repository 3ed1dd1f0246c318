package jsonl_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
)

// deleteWithFault stores a session, then deletes it with the operation at
// index inject (counted from the start of the delete) failing with EIO, or
// with nothing failing when inject is negative. It returns the operations
// the delete performed and its error.
func deleteWithFault(t *testing.T, inject int) ([]faultfs.Record, error) {
	t.Helper()
	ctx := context.Background()
	ffs := faultfs.New(nil)
	s := durStore(t, t.TempDir(), jsonl.CompressionNone, ffs)
	h, err := s.Create(ctx, durHeader(), jsonl.CreateOptions{HandleID: "writer"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, durSeqEvents(t, 0, 3)))
	require.NoError(t, h.Close(ctx))
	ffs.Reset()
	if inject >= 0 {
		ffs.InjectAt(inject, syscall.EIO)
	}
	err = s.Delete(ctx, durID)
	return ffs.Records(), err
}

// A delete fsyncs the .deleted directory twice: after moving the session
// in, and after removing its files from there. A failure of either fsync
// is reported, not dropped.
func TestDeleteReportsItsLastTrashFsync(t *testing.T) {
	ops, err := deleteWithFault(t, -1)
	require.NoError(t, err)
	var trashSyncs []int
	for _, op := range ops {
		if op.Op == faultfs.OpSync && strings.HasSuffix(op.Path, "/.deleted") {
			trashSyncs = append(trashSyncs, op.Index)
		}
	}
	require.Len(t, trashSyncs, 2, "fsyncs of the .deleted directory among %v", ops)
	require.Equal(t, ops[len(ops)-1].Op, faultfs.OpClose, "the delete ends with closing the directory it fsynced")

	_, err = deleteWithFault(t, trashSyncs[0])
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, err.Error(), `session "dur-session": deleted, but making the deletion durable failed: `)

	_, err = deleteWithFault(t, trashSyncs[1])
	require.ErrorIs(t, err, syscall.EIO)
	require.NotContains(t, err.Error(), "making the deletion durable failed")
}
