package workerapp

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
)

// Environment variables of compaction (docs/API.md "Compaction").
const (
	EnvContextWindow    = "SESSIONFLOW_CONTEXT_WINDOW"
	EnvCompactThreshold = "SESSIONFLOW_COMPACT_THRESHOLD"
	EnvCompactRetain    = "SESSIONFLOW_COMPACT_RETAIN"
	EnvSummaryMaxTokens = "SESSIONFLOW_SUMMARY_MAX_TOKENS"
)

// compactFlags are the flags of compaction.
type compactFlags struct {
	window, summaryMax int
	threshold, retain  string
}

func addCompactFlags(fs *flag.FlagSet) *compactFlags {
	f := &compactFlags{}
	fs.IntVar(&f.window, "context-window", 0, "context window of every route, in tokens, in place of the providers' model table (a session's agentOptions.contextWindow wins); 0 = the table's (env "+EnvContextWindow+")")
	fs.StringVar(&f.threshold, "compact-threshold", strconv.FormatFloat(agent.DefaultCompactThreshold, 'g', -1, 64), "share of the context window above which a step's request is compacted first, in (0, 1] (env "+EnvCompactThreshold+")")
	fs.StringVar(&f.retain, "compact-retain", strconv.FormatFloat(agent.DefaultCompactRetain, 'g', -1, 64), "share of the context window a compaction under pressure keeps verbatim, less than --compact-threshold (env "+EnvCompactRetain+")")
	fs.IntVar(&f.summaryMax, "summary-max-tokens", agent.DefaultSummaryMaxTokens, "output cap of a compaction's summarisation call (at most a quarter of a known window); 0 = default (env "+EnvSummaryMaxTokens+")")
	return f
}

// config returns the compaction settings (AgentActivities takes the
// windows of routes the worker does not set from provider.ContextWindow).
func (f *compactFlags) config(pick func(flagName, envName, flagValue string) (string, string)) (agent.CompactionSettings, error) {
	var s agent.CompactionSettings
	window, err := pickCount(pick("context-window", EnvContextWindow, strconv.Itoa(f.window)))
	if err != nil {
		return s, err
	}
	s.ContextWindow = int64(window)
	if s.Threshold, err = pickRatio(pick("compact-threshold", EnvCompactThreshold, f.threshold)); err != nil {
		return s, err
	}
	if s.Retain, err = pickRatio(pick("compact-retain", EnvCompactRetain, f.retain)); err != nil {
		return s, err
	}
	if s.Retain >= s.Threshold {
		return s, fmt.Errorf("--compact-retain (%g) must be less than --compact-threshold (%g)", s.Retain, s.Threshold)
	}
	max, err := pickCount(pick("summary-max-tokens", EnvSummaryMaxTokens, strconv.Itoa(f.summaryMax)))
	s.SummaryMaxTokens = int64(max)
	return s, err
}

// pickRatio parses a share in (0, 1].
func pickRatio(v, src string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r > 0 && r <= 1) {
		return 0, fmt.Errorf("%s: %q is not a number in (0, 1]", src, v)
	}
	return r, nil
}

// tableWindow is the context window of a route in the providers' model
// table (provider.ContextWindow), 0 when unknown.
func tableWindow(name, model string) int64 {
	w, _ := provider.ContextWindow(name, model)
	return w
}
