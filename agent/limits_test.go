package agent_test

import (
	"context"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
)

// trickle streams one text chunk every interval until its context ends.
type trickle struct{ interval time.Duration }

func (p trickle) Stream(ctx context.Context, _ provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		tick := time.NewTicker(p.interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				yield(provider.Chunk{}, ctx.Err())
				return
			case <-tick.C:
				if !yield(text("drip "), nil) {
					return
				}
			}
		}
	}
}

// limitError asserts err is the application error of a model call limit
// and returns it with its provider error.
func limitError(t *testing.T, err error, typ, code string, retryable bool) provider.Error {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, typ, app.Type())
	require.Equal(t, !retryable, app.NonRetryable())
	var pe provider.Error
	require.NoError(t, app.Details(&pe))
	require.Equal(t, code, pe.Code)
	require.Equal(t, retryable, pe.Retryable)
	return pe
}

func TestCallModelIdleStreamFailsRetryable(t *testing.T) {
	f := newFixture(t, nil, response{chunks: []provider.Chunk{text("x")}, stall: true})
	f.acts.Limits = agent.ModelLimits{IdleTimeout: 100 * time.Millisecond}
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	pe := limitError(t, err, "ProviderUnavailable", "MODEL_STREAM_IDLE", true)
	require.Equal(t, "the model stream sent nothing for 100ms", pe.Message)
	require.Len(t, f.log(), 3, "nothing stored")
}

func TestCallModelTrickleEndsAtTheCallTimeout(t *testing.T) {
	f := newFixture(t, nil)
	f.acts.Providers["fake"] = trickle{interval: 10 * time.Millisecond}
	f.acts.Limits = agent.ModelLimits{IdleTimeout: time.Minute, CallTimeout: 300 * time.Millisecond}
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	pe := limitError(t, err, "ProviderRefused", "MODEL_CALL_TIMEOUT", false)
	require.Equal(t, "the model call streamed for 300ms without finishing", pe.Message)
	require.Len(t, f.log(), 3, "nothing stored")
}

func TestCallModelOutputCap(t *testing.T) {
	k := strings.Repeat("x", 1000)
	chunks := []provider.Chunk{text(k), reasoning(k), callChunk(0, "c1", "read_file", k), text(k), finish(provider.FinishToolCalls)}
	f := newFixture(t, nil, response{chunks: chunks})
	f.acts.Limits = agent.ModelLimits{MaxOutputBytes: 3999}
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	pe := limitError(t, err, "ProviderRefused", "MODEL_OUTPUT_TOO_LARGE", false)
	require.Equal(t, "the model's output exceeds the limit of 3999 bytes", pe.Message)
	require.Len(t, f.log(), 3, "nothing stored")

	// Text, reasoning and tool arguments count; exactly the cap passes.
	f.acts.Limits.MaxOutputBytes = 4000
	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, provider.FinishToolCalls, res.Finish)
	require.Equal(t, callTypes(13), types(f.log()))
}

func TestModelLimitsValidate(t *testing.T) {
	require.NoError(t, agent.ModelLimits{}.Validate())
	require.EqualError(t, agent.ModelLimits{IdleTimeout: -time.Second}.Validate(), "the model idle timeout -1s is negative")
	require.EqualError(t, agent.ModelLimits{CallTimeout: -time.Second}.Validate(), "the model call timeout -1s is negative")
	require.EqualError(t, agent.ModelLimits{MaxOutputBytes: -1}.Validate(), "the model output limit -1 is negative")
}
