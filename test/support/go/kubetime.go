// Parses timestamps with the layouts the Kubernetes API server decodes them with (k8s.io/apimachinery
// metav1: MicroTime with RFC3339Micro, Time with time.RFC3339), so that a test can check what the controller
// sent with Go's own time package rather than with our reading of it. Reads a JSON array of
// {"type": "MicroTime"|"Time", "value": "..."} on stdin and writes, for each, the error Go reports (empty
// when it parses) and the value as metav1 writes it back (its canonical form).
package main

import (
	"encoding/json"
	"os"
	"time"
)

// RFC3339Micro is metav1's layout for MicroTime (k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go).
const RFC3339Micro = "2006-01-02T15:04:05.000000Z07:00"

type input struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type output struct {
	Value     string `json:"value"`
	Error     string `json:"error"`
	Canonical string `json:"canonical"`
}

func main() {
	var inputs []input
	if err := json.NewDecoder(os.Stdin).Decode(&inputs); err != nil {
		panic(err)
	}
	outputs := make([]output, 0, len(inputs))
	for _, in := range inputs {
		layout := time.RFC3339
		if in.Type == "MicroTime" {
			layout = RFC3339Micro
		}
		out := output{Value: in.Value}
		parsed, err := time.Parse(layout, in.Value)
		if err != nil {
			out.Error = err.Error()
		} else {
			// As metav1 marshals it: UTC, whole seconds for Time, microseconds for MicroTime.
			out.Canonical = parsed.UTC().Format(layout)
		}
		outputs = append(outputs, out)
	}
	if err := json.NewEncoder(os.Stdout).Encode(outputs); err != nil {
		panic(err)
	}
}
