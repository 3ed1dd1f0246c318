package workflows_test

// History stays bounded: a resume of a 1,000,000-event session records the
// same history events as a resume of a 10-event one, and no payload in
// either history exceeds 8 KiB (LIFECYCLE.md §9.3: the store is the source
// of truth).

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// recordingConverter records the size of every payload the environment
// encodes: workflow input and result, activity inputs and results, side
// effects, update arguments and results — what a history would hold.
type recordingConverter struct {
	converter.DataConverter
	mu    sync.Mutex
	sizes []int
}

func (c *recordingConverter) record(p *commonpb.Payload) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizes = append(c.sizes, proto.Size(p))
}

func (c *recordingConverter) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := c.DataConverter.ToPayload(v)
	if err == nil {
		c.record(p)
	}
	return p, err
}

func (c *recordingConverter) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	ps, err := c.DataConverter.ToPayloads(vs...)
	if err == nil {
		for _, p := range ps.GetPayloads() {
			c.record(p)
		}
	}
	return ps, err
}

// writeBigLog creates a raw session with n todo/write events by writing
// the JSONL lines straight after a header-only log.
func writeBigLog(t *testing.T, st *jsonl.Store, id string, n int) {
	t.Helper()
	sessiontest.WriteStored(t, st, wire.Header{ID: id, CreatedAt: 1}, 0, nil)
	snap, err := st.Stat(context.Background(), id)
	require.NoError(t, err)
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		buf = append(buf[:0], `{"type":"todo/write","seq":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"time":1,"data":{}}`+"\n"...)
		_, err = w.Write(buf)
		require.NoError(t, err)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

type historyShape struct {
	activities []string
	payloads   int
	maxPayload int
}

func resumeShape(t *testing.T, st *jsonl.Store, id string) historyShape {
	t.Helper()
	h := sessiontest.NewHarnessOn(t, st).WithID(id)
	rc := &recordingConverter{DataConverter: converter.GetDefaultDataConverter()}
	h.Env.SetDataConverter(rc)
	ready, disposed := h.ReadyThenDispose(time.Second, "")
	// The history's shape is under test, not the store's speed: reading a
	// million events on a loaded machine may take longer than the store
	// activities' default heartbeat timeout (5 s) allows between beats.
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id,
		Options: &wire.Options{HeartbeatTimeoutMs: 60_000}})
	require.NoError(t, h.Env.GetWorkflowError())
	var info wire.SessionInfo
	ready.Decode(t, &info)
	var dr wire.DisposeResult
	disposed.Decode(t, &dr)
	sessiontest.RequireReleased(t, st, id)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	shape := historyShape{activities: h.StartedNames(), payloads: len(rc.sizes)}
	for _, s := range rc.sizes {
		shape.maxPayload = max(shape.maxPayload, s)
	}
	return shape
}

func TestResumeHistoryIndependentOfLogSize(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	const big = 1_000_000
	writeBigLog(t, st, "small", 10)
	writeBigLog(t, st, "big", big)
	small := resumeShape(t, st, "small")
	large := resumeShape(t, st, "big")
	require.Equal(t, small.activities, large.activities)
	require.Equal(t, small.payloads, large.payloads)
	require.LessOrEqual(t, small.maxPayload, 8<<10)
	require.LessOrEqual(t, large.maxPayload, 8<<10)
	// The marker landed after the last event: the log was really read.
	snap, err := st.Stat(context.Background(), "big")
	require.NoError(t, err)
	raw, err := os.ReadFile(snap.Path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, big+2)
	var last session.Event
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	require.Equal(t, wire.TypeEndSeed, last.Type)
	require.Equal(t, int64(big), last.Seq)
	t.Logf("activities %v, %d payloads, largest %d bytes", large.activities, large.payloads, large.maxPayload)
}
