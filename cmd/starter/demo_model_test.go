package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// demoModelRequests records what the demo's model servers were sent: the
// number of requests and, per request, its system prompt and its tool
// result ("" when none).
type demoModelRequests struct {
	mu       sync.Mutex
	requests int
	systems  []string
	results  []string
}

// record adds one request's system prompts and tool result and returns
// the request's number, from 1.
func (s *demoModelRequests) record(result string, systems ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.systems = append(s.systems, systems...)
	s.results = append(s.results, result)
	return s.requests
}

// streamDemoSentence sends the words of the demo model's first sentence
// slowly; false when ctx ends first. With stall (the first request, whose
// worker the demo kills while it streams) it stops after two words until
// ctx ends, so the kill lands mid-stream however late the demo sees them.
func streamDemoSentence(ctx context.Context, stall bool, send func(word string)) bool {
	for i, word := range strings.Fields("I will run the test suite now, it takes a few seconds.") {
		if stall && i == 2 {
			<-ctx.Done()
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(300 * time.Millisecond):
		}
		send(word + " ")
	}
	return true
}

// requireDemoStory checks the demo's output on a real provider's model
// (provider answering as model, the tool call named callID) and what the
// model server was sent: the killed stream, its re-run and the answer, the
// last carrying TOOL_OUTCOME_UNKNOWN's explanation. msgSeq is the seq of
// step 1's assistant/message (after its route and its chunks), the tool
// result follows its tool/call, and the log holds events events. It returns
// the system prompts for the caller to check.
func requireDemoStory(t *testing.T, stdout string, srv *demoModelRequests, provider, model, callID string, msgSeq, events int) []string {
	t.Helper()
	for _, want := range []string{
		"its agent on " + provider + " model " + model,
		"!! SIGKILL worker 1 (pid ",
		"!! SIGKILL worker 2 (pid ",
		"← run_command (" + callID + ") finished TOOL_OUTCOME_UNKNOWN",
		"The outcome of the test run is unknown; I will not run it again.",
		"turn 1 completed",
		fmt.Sprintf("model call of step 1: re-run on the next worker (idempotent); one assistant/message stored (seq %d)", msgSeq),
		fmt.Sprintf("tool call %s: not run again on the next worker (the tool is not idempotent); tool/result seq %d: TOOL_OUTCOME_UNKNOWN", callID, msgSeq+2),
		fmt.Sprintf("3 request/context\n4..%d assistant/chunk ×%d\n%d assistant/message\n", msgSeq-1, msgSeq-4, msgSeq),
		fmt.Sprintf("%d events, seqs 0..%d contiguous", events, events-1),
	} {
		require.Contains(t, stdout, want)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, 3, srv.requests, "the killed stream, its re-run, the answer")
	require.Len(t, srv.systems, 3)
	require.Equal(t, "", srv.results[0])
	require.Equal(t, "", srv.results[1])
	require.Contains(t, srv.results[2], "Its outcome is unknown")
	return append([]string(nil), srv.systems...)
}
