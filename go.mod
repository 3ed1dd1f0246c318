module github.com/sessionflow/sessionflow

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.temporal.io/sdk v1.51.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
