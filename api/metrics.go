package api

// TypeMetrics asks the daemon for its Prometheus metrics (no body); the
// answer is a Metrics of the same type.
const TypeMetrics = "metrics"

// Metrics is the daemon's Prometheus exposition in the text format: the
// same families its --metrics-addr endpoint serves at /metrics.
type Metrics struct {
	Text string `json:"text"`
}
