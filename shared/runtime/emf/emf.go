// Package emf writes CloudWatch Embedded Metric Format documents: JSON log
// lines that CloudWatch Logs turns into metrics without an API call.
package emf

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Namespace is the CloudWatch namespace of every DLQ Quarantine metric.
const Namespace = "DLQQuarantine"

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []metricDef `json:"Metrics"`
}

type meta struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// Write emits one EMF document: the given counts under the given dimension
// values. Dimension values must be low-cardinality (source names, classes),
// never payload values.
func Write(w io.Writer, at time.Time, dims map[string]string, counts map[string]float64) error {
	doc := make(map[string]any, len(dims)+len(counts)+1)
	names := slices.Sorted(maps.Keys(dims))
	d := directive{Namespace: Namespace, Dimensions: [][]string{names}}
	if len(names) == 0 {
		d.Dimensions = [][]string{{}}
	}
	for _, k := range names {
		doc[k] = dims[k]
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		d.Metrics = append(d.Metrics, metricDef{Name: k, Unit: "Count"})
		doc[k] = counts[k]
	}
	doc["_aws"] = meta{Timestamp: at.UnixMilli(), CloudWatchMetrics: []directive{d}}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("marshal emf: %w", err)
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
