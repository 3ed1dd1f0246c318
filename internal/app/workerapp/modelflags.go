package workerapp

import (
	"flag"
	"strconv"

	"github.com/sessionflow/sessionflow/agent"
)

// Environment variables of the model call limits (docs/API.md "Model call
// limits").
const (
	EnvModelIdleTimeout = "SESSIONFLOW_MODEL_IDLE_TIMEOUT"
	EnvModelCallTimeout = "SESSIONFLOW_MODEL_CALL_TIMEOUT"
	EnvMaxModelOutput   = "SESSIONFLOW_MAX_MODEL_OUTPUT"
)

// modelFlags are the flags that bound each model call.
type modelFlags struct {
	idleTimeout, callTimeout string
	maxOutput                int
}

func addModelFlags(fs *flag.FlagSet) *modelFlags {
	f := &modelFlags{}
	fs.StringVar(&f.idleTimeout, "model-idle-timeout", agent.DefaultModelIdleTimeout.String(), "longest wait for a model stream's first or next chunk; past it the attempt fails and is retried; 0 = default (env "+EnvModelIdleTimeout+")")
	fs.StringVar(&f.callTimeout, "model-call-timeout", agent.DefaultModelCallTimeout.String(), "longest one model call attempt may stream in all; past it the turn ends error MODEL_CALL_TIMEOUT, not retried; 0 = default (env "+EnvModelCallTimeout+")")
	fs.IntVar(&f.maxOutput, "max-model-output", agent.DefaultMaxModelOutput, "bytes of text, reasoning and tool arguments one model call may produce; past it the turn ends error MODEL_OUTPUT_TOO_LARGE and nothing of the call is stored; 0 = default (env "+EnvMaxModelOutput+")")
	return f
}

// config returns the model call limits.
func (f *modelFlags) config(pick func(flagName, envName, flagValue string) (string, string)) (agent.ModelLimits, error) {
	var (
		l   agent.ModelLimits
		err error
	)
	if l.IdleTimeout, err = pickDuration(pick("model-idle-timeout", EnvModelIdleTimeout, f.idleTimeout)); err != nil {
		return l, err
	}
	if l.CallTimeout, err = pickDuration(pick("model-call-timeout", EnvModelCallTimeout, f.callTimeout)); err != nil {
		return l, err
	}
	l.MaxOutputBytes, err = pickCount(pick("max-model-output", EnvMaxModelOutput, strconv.Itoa(f.maxOutput)))
	return l, err
}
