// Package cwmetrics builds and sends CloudWatch PutMetricData calls: the one
// place that makes a datum and splits a run's data into calls CloudWatch
// accepts. (Functions that can log a metric instead write EMF, package emf.)
package cwmetrics

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// CloudWatch's limits on one PutMetricData call (API reference,
// PutMetricData: "limited to 1 MB in size for HTTP POST requests ... no more
// than 1000 different metrics").
const (
	MaxPerCall      = 1000
	MaxPayloadBytes = 1 << 20
)

// budget is what Put lets the data of one call take by its estimate: the
// payload limit less room for the namespace, the action and the envelope.
const budget = MaxPayloadBytes - 64<<10

// API is the one CloudWatch method Put uses.
type API interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

// Dim is a dimension.
func Dim(name, value string) types.Dimension {
	return types.Dimension{Name: aws.String(name), Value: aws.String(value)}
}

// Datum is one value of metric name with its unit and dimensions, in order.
func Datum(name string, v float64, unit types.StandardUnit, dims ...types.Dimension) types.MetricDatum {
	return types.MetricDatum{MetricName: aws.String(name), Value: aws.Float64(v), Unit: unit, Dimensions: dims}
}

// Put sends data to namespace in as few PutMetricData calls as CloudWatch's
// limits allow (at most MaxPerCall data and, by a generous estimate of the
// encoded size, well under MaxPayloadBytes a call), in order. It makes no
// call for no data and stops at the first call that fails, returning its
// error as it is: the calls before it stand.
func Put(ctx context.Context, api API, namespace string, data []types.MetricDatum) error {
	for len(data) > 0 {
		n := batch(data)
		if _, err := api.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(namespace), MetricData: data[:n]}); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// batch is how many of data, from the first, the next call takes: always
// at least one.
func batch(data []types.MetricDatum) int {
	size := 0
	for i, d := range data {
		size += estimate(d)
		if i == MaxPerCall || (i > 0 && size > budget) {
			return i
		}
	}
	return len(data)
}

// estimate bounds the encoded size of d from above: every string counted
// three times over (percent-encoding at worst) and a fixed allowance for
// each field's key, which in the query protocol repeats the datum's index.
func estimate(d types.MetricDatum) int {
	const field = 64
	n := 4*field + 3*len(aws.ToString(d.MetricName)) + 3*len(d.Unit)
	for _, dim := range d.Dimensions {
		n += 2*field + 3*(len(aws.ToString(dim.Name))+len(aws.ToString(dim.Value)))
	}
	n += 2 * field * (len(d.Values) + len(d.Counts))
	if d.StatisticValues != nil {
		n += 4 * 2 * field
	}
	return n
}
