package agent

import "github.com/sessionflow/sessionflow/provider"

// The settings of compaction and the resolution of a route's context
// window.

// Compaction defaults (docs/API.md "Compaction"), the harness's.
const (
	// DefaultCompactThreshold is the share of the context window above
	// which a step's request is compacted first.
	DefaultCompactThreshold = 0.8
	// DefaultCompactRetain is the share of the context window kept verbatim
	// at the tail of the conversation by a compaction under pressure.
	DefaultCompactRetain = 0.16
	// DefaultSummaryMaxTokens caps the output of a summarisation call.
	DefaultSummaryMaxTokens = 8192
	// DefaultPruneChars, DefaultPruneHeadChars and DefaultPruneTailChars
	// are the tool-result pruning budgets, in Unicode code points.
	DefaultPruneChars     = 8192
	DefaultPruneHeadChars = 4096
	DefaultPruneTailChars = 1024
)

// CompactionSettings tune compaction; zero fields take the defaults.
type CompactionSettings struct {
	// ContextWindow, when positive, is the context window of every route
	// of the worker, in tokens, in place of the table's.
	ContextWindow int64
	// Windows returns the context window of a route (0: unknown): the
	// table of the providers' models. nil knows none.
	Windows func(providerName, model string) int64
	// Threshold is the share of the window above which a step compacts
	// first (DefaultCompactThreshold).
	Threshold float64
	// Retain is the share of the window a compaction under pressure keeps
	// verbatim (DefaultCompactRetain); less than Threshold.
	Retain float64
	// SummaryMaxTokens caps a summarisation call's output
	// (DefaultSummaryMaxTokens).
	SummaryMaxTokens int64
	// PruneChars, PruneHeadChars and PruneTailChars are the tool-result
	// pruning budgets (DefaultPruneChars, ...).
	PruneChars, PruneHeadChars, PruneTailChars int
}

func (s CompactionSettings) threshold() float64 {
	if s.Threshold > 0 {
		return s.Threshold
	}
	return DefaultCompactThreshold
}

func (s CompactionSettings) retain() float64 {
	if s.Retain > 0 {
		return s.Retain
	}
	return DefaultCompactRetain
}

func (s CompactionSettings) summaryMaxTokens() int64 {
	if s.SummaryMaxTokens > 0 {
		return s.SummaryMaxTokens
	}
	return DefaultSummaryMaxTokens
}

func (s CompactionSettings) prune() pruneSettings {
	p := pruneSettings{threshold: DefaultPruneChars, head: DefaultPruneHeadChars, tail: DefaultPruneTailChars}
	if s.PruneChars > 0 {
		p.threshold = s.PruneChars
	}
	if s.PruneHeadChars > 0 {
		p.head = s.PruneHeadChars
	}
	if s.PruneTailChars > 0 {
		p.tail = s.PruneTailChars
	}
	return p
}

// contextWindow resolves the context window of a route: the session's
// (override), the worker's, the provider's own, the table's; 0 when none
// is known.
func (a *Activities) contextWindow(override int64, providerName, model string, p provider.Provider) int64 {
	switch {
	case override > 0:
		return override
	case a.Compaction.ContextWindow > 0:
		return a.Compaction.ContextWindow
	}
	if w, ok := p.(provider.WindowReporter); ok && w.ContextWindow() > 0 {
		return w.ContextWindow()
	}
	if a.Compaction.Windows != nil {
		return a.Compaction.Windows(providerName, model)
	}
	return 0
}
