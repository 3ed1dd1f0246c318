package wftrace

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportsNoSDKNoExporter: the package compiles without the
// OpenTelemetry SDK, its exporters and any other sessionflow package, so
// workflow code that imports it does not compile them either.
func TestImportsNoSDKNoExporter(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "go.opentelemetry.io/otel/trace")
	for _, p := range deps {
		require.False(t, strings.HasPrefix(p, "go.opentelemetry.io/otel/sdk"), "imports the OpenTelemetry SDK: %s", p)
		require.NotContains(t, p, "/exporters/", "imports an exporter")
		if strings.HasPrefix(p, "github.com/sessionflow/sessionflow/") {
			require.Equal(t, "github.com/sessionflow/sessionflow/internal/lib/wftrace", p, "imports a sessionflow package")
		}
	}
}
