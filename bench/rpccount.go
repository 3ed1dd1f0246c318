package bench

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rpcCounter counts the gRPC calls of a Temporal client by method and
// outcome. Installed as a dial option, it sits inside the SDK's retry
// interceptor and so sees every attempt: an update the server refuses with
// ResourceExhausted and the SDK sends again after its backoff is counted
// once per attempt.
type rpcCounter struct {
	mu     sync.Mutex
	counts map[rpcOutcome]int
}

// rpcOutcome is a method and how one attempt of it ended: "OK", or the gRPC
// code and the start of the server's message.
type rpcOutcome struct {
	Method, Outcome string
}

func newRPCCounter() *rpcCounter { return &rpcCounter{counts: map[rpcOutcome]int{}} }

// interceptor is the client interceptor that counts.
func (r *rpcCounter) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	attempt := "0"
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if a := md.Get("x-retry-attempt"); len(a) > 0 {
			attempt = a[0]
		}
	}
	r.add(path.Base(method), attempt, err)
	return err
}

// add counts one attempt of method that ended with err; attempt is the
// SDK's retry number of the call (0 for the first attempt).
func (r *rpcCounter) add(method, attempt string, err error) {
	outcome := "OK"
	if err != nil {
		st := status.Convert(err)
		msg := st.Message()
		if len(msg) > 60 {
			msg = msg[:60]
		}
		outcome = fmt.Sprintf("%s (retry %s): %s", st.Code(), attempt, msg)
	}
	r.mu.Lock()
	r.counts[rpcOutcome{method, outcome}]++
	r.mu.Unlock()
}

// snapshot returns a copy of the counts.
func (r *rpcCounter) snapshot() map[rpcOutcome]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[rpcOutcome]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// failuresSince returns the failed attempts of method counted since
// before (a snapshot), by outcome.
func (r *rpcCounter) failuresSince(before map[rpcOutcome]int, method string) map[string]int {
	out := map[string]int{}
	for k, v := range r.snapshot() {
		if k.Method != method || k.Outcome == "OK" {
			continue
		}
		if d := v - before[k]; d > 0 {
			out[k.Outcome] = d
		}
	}
	return out
}

// formatFailures renders failuresSince's answer on one line, most frequent
// first; "none" when empty.
func formatFailures(f map[string]int) string {
	if len(f) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if f[keys[i]] != f[keys[j]] {
			return f[keys[i]] > f[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d x %s", f[k], k)
	}
	return strings.Join(parts, "; ")
}
