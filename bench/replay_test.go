package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// replayRegistry registers the workflows on a replayer as the worker does;
// activities are not needed to replay.
type replayRegistry struct {
	worker.WorkflowReplayer
	worker.NexusServiceRegistry
}

func (replayRegistry) RegisterActivity(any)                                         {}
func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions)    {}
func (replayRegistry) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {}

// replayLengths are the history lengths whose full replay is timed: the
// continue-as-new threshold's default, twice it, and just below the
// server's default suggestion (4096).
var replayLengths = []int{1000, 2000, 4000}

// replayParallel is the number of sessions replayed at once in the
// parallel variant: the sessions of a killed worker land on the survivors
// together.
const replayParallel = 4

// BenchmarkReplayLiveHistory times the full replay of a live session's
// history of about 1000, 2000 and 4000 events (single-event appends, the
// session's threshold raised so that it does not continue as new), one at
// a time and four at once: what a worker does for every session of a
// killed worker, within the workflow task timeout (docs/DECISIONS.md D64).
//
//	go test ./bench -run '^$' -bench ReplayLiveHistory -benchtime 5x
func BenchmarkReplayLiveHistory(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.ModuleDir = ".."
	cfg.Turns.Enabled = false
	e, err := start(ctx, cfg, func(string, ...any) {})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.stop() }()
	hists, err := e.liveHistories(ctx, "replay-live", replayLengths)
	if err != nil {
		b.Fatal(err)
	}
	replayer := worker.NewWorkflowReplayer()
	workerapp.Register(replayRegistry{WorkflowReplayer: replayer}, nil, nil)
	for i, hist := range hists {
		b.Run(fmt.Sprintf("events=%d", replayLengths[i]), func(b *testing.B) {
			for b.Loop() {
				if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(hist.Events)), "history-events")
		})
		b.Run(fmt.Sprintf("events=%d/sessions=%d", replayLengths[i], replayParallel), func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make([]error, replayParallel)
				for j := range replayParallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[j] = replayer.ReplayWorkflowHistory(nil, hist)
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(hist.Events)), "history-events")
		})
	}
}

// liveHistories appends single events to one live session and returns its
// history each time its length reaches one of lengths (ascending).
func (e *env) liveHistories(ctx context.Context, id string, lengths []int) ([]*historypb.History, error) {
	req := e.createReq(id, 0)
	req.Options = &wire.Options{ContinueAsNewEvents: workflows.MaxContinueAsNewEvents}
	info, err := e.sf.Create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	wid := wire.WorkflowID(id)
	seq := info.NextSeq
	var out []*historypb.History
	for _, n := range lengths {
		for {
			desc, err := e.tc.DescribeWorkflow(ctx, wid, "")
			if err != nil {
				return nil, err
			}
			length := int(desc.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength())
			if length >= n {
				break
			}
			// An append adds about six events; stop short of the server's
			// suggestion (4096 events).
			for range max(1, (n-length)/8) {
				ev, err := event(seq, 64)
				if err != nil {
					return nil, err
				}
				if _, err := e.sf.Append(ctx, id, session.WireEvents([]session.Event{ev})); err != nil {
					return nil, fmt.Errorf("append at %d: %w", seq, err)
				}
				seq++
			}
		}
		evs, _, err := e.history(ctx, wid, "")
		if err != nil {
			return nil, err
		}
		if evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() != wire.CreateSessionName {
			return nil, fmt.Errorf("the session continued as new before %d events", n)
		}
		out = append(out, &historypb.History{Events: evs})
	}
	_, err = e.sf.Dispose(ctx, id)
	return out, err
}
