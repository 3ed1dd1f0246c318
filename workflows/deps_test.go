package workflows_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkflowsCompileNoTelemetryExporter: workflow code compiles without
// the OpenTelemetry SDK and its exporters (those are the programs' wiring,
// internal/app/telemetry); it traces through internal/lib/wftrace only.
func TestWorkflowsCompileNoTelemetryExporter(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/sessionflow/sessionflow/internal/lib/wftrace")
	for _, p := range deps {
		require.False(t, strings.HasPrefix(p, "go.opentelemetry.io/otel/sdk"), "imports the OpenTelemetry SDK: %s", p)
		require.NotContains(t, p, "/exporters/", "imports an exporter")
		require.NotContains(t, p, "prometheus", "imports a metrics exporter")
		require.NotEqual(t, "github.com/sessionflow/sessionflow/internal/app/telemetry", p)
	}
}
