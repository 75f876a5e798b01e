package memstore_test

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, memstore.New())
}

func TestPayloadsContract(t *testing.T) {
	p := memstore.NewPayloads()
	storetest.RunPayloads(t, p, func(t *testing.T, ref quarantine.ObjectRef, data []byte) { p.Overwrite(ref.Key, data) })
}

func TestListerContract(t *testing.T) {
	s := memstore.New()
	storetest.RunLister(t, s, s)
	storetest.RunListerPaging(t, s, s)
}

func TestCountersContract(t *testing.T) {
	s := memstore.New()
	storetest.RunCounters(t, s, s, s, s)
}

func TestBoundedTexts(t *testing.T) {
	storetest.RunBoundedTexts(t, memstore.New(), memstore.NewPayloads())
}

func TestHoldContract(t *testing.T) {
	s := memstore.New()
	storetest.RunHold(t, s, s, s, func(_ *testing.T, id string, change func(*quarantine.Record)) { s.Tamper(id, change) })
}

func TestUpdateContract(t *testing.T) {
	s := memstore.New()
	storetest.RunUpdate(t, s, s)
}
