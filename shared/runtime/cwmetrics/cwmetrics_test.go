package cwmetrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

type fakeCW struct {
	calls  []*cloudwatch.PutMetricDataInput
	failAt int // 1-based call that fails; 0 never
}

var errPut = errors.New("put failed")

func (f *fakeCW) PutMetricData(_ context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	f.calls = append(f.calls, in)
	if len(f.calls) == f.failAt {
		return nil, errPut
	}
	return &cloudwatch.PutMetricDataOutput{}, nil
}

func data(n int, dimValue string) []types.MetricDatum {
	out := make([]types.MetricDatum, n)
	for i := range out {
		out[i] = Datum(fmt.Sprintf("m%d", i), float64(i), types.StandardUnitCount, Dim("Source", dimValue))
	}
	return out
}

func TestDatumAndDim(t *testing.T) {
	t.Parallel()
	d := Datum("Depth", 3, types.StandardUnitSeconds, Dim("Source", "orders"), Dim("Status", "PARKED"))
	if aws.ToString(d.MetricName) != "Depth" || aws.ToFloat64(d.Value) != 3 || d.Unit != types.StandardUnitSeconds ||
		len(d.Dimensions) != 2 || aws.ToString(d.Dimensions[0].Name) != "Source" || aws.ToString(d.Dimensions[0].Value) != "orders" ||
		aws.ToString(d.Dimensions[1].Name) != "Status" || aws.ToString(d.Dimensions[1].Value) != "PARKED" {
		t.Fatalf("datum = %+v", d)
	}
	if d := Datum("n", 1, types.StandardUnitCount); d.Dimensions != nil {
		t.Fatalf("no dimensions should stay nil, got %+v", d.Dimensions)
	}
}

func TestPutBatchesWithinTheLimits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1024) // a dimension value at its limit
	for _, tc := range []struct {
		name  string
		data  []types.MetricDatum
		sizes []int
	}{
		{"none", nil, nil},
		{"one", data(1, "s"), []int{1}},
		{"exactly the count limit", data(MaxPerCall, "s"), []int{MaxPerCall}},
		{"over the count limit", data(2*MaxPerCall+1, "s"), []int{MaxPerCall, MaxPerCall, 1}},
		{"large data split by size", data(900, long), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cw := &fakeCW{}
			if err := Put(context.Background(), cw, "NS", tc.data); err != nil {
				t.Fatal(err)
			}
			var got []int
			var all []types.MetricDatum
			for _, in := range cw.calls {
				if aws.ToString(in.Namespace) != "NS" {
					t.Fatalf("namespace %q", aws.ToString(in.Namespace))
				}
				got = append(got, len(in.MetricData))
				all = append(all, in.MetricData...)
				if len(in.MetricData) > MaxPerCall || encodedSize(in) > MaxPayloadBytes {
					t.Fatalf("a call of %d data, ~%d bytes, is over the limits", len(in.MetricData), encodedSize(in))
				}
			}
			if len(all) != len(tc.data) {
				t.Fatalf("sent %d of %d data", len(all), len(tc.data))
			}
			for i := range all {
				if aws.ToString(all[i].MetricName) != aws.ToString(tc.data[i].MetricName) {
					t.Fatalf("datum %d out of order", i)
				}
			}
			if tc.sizes != nil && fmt.Sprint(got) != fmt.Sprint(tc.sizes) {
				t.Fatalf("calls of %v, want %v", got, tc.sizes)
			}
			if tc.sizes == nil && len(tc.data) > 0 && len(got) < 2 {
				t.Fatalf("calls of %v: large data was not split", got)
			}
		})
	}
}

// encodedSize is the query-protocol size of in, as an AWS SDK sends it.
func encodedSize(in *cloudwatch.PutMetricDataInput) int {
	n := len("Action=PutMetricData&Version=2010-08-01&Namespace=") + len(aws.ToString(in.Namespace))
	for i, d := range in.MetricData {
		p := fmt.Sprintf("&MetricData.member.%d.", i+1)
		n += len(p) + len("MetricName=") + len(aws.ToString(d.MetricName))
		n += len(p) + len("Value=") + 24 + len(p) + len("Unit=") + len(d.Unit)
		for j, dim := range d.Dimensions {
			q := fmt.Sprintf("%sDimensions.member.%d.", p, j+1)
			n += len(q) + len("Name=") + len(aws.ToString(dim.Name)) + len(q) + len("Value=") + len(aws.ToString(dim.Value))
		}
	}
	return n
}

func TestPutStopsAtTheFirstFailedCall(t *testing.T) {
	t.Parallel()
	cw := &fakeCW{failAt: 2}
	err := Put(context.Background(), cw, "NS", data(3*MaxPerCall, "s"))
	if !errors.Is(err, errPut) || len(cw.calls) != 2 {
		t.Fatalf("err %v after %d calls, want errPut after 2", err, len(cw.calls))
	}
}
