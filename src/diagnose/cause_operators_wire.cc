#include "diagnose/cause_operators_wire.h"

#include <fmt/format.h>

#include "base/byte_io.h"

namespace teller::diagnose {
namespace {

constexpr std::string_view kQueriesMagic = "TLOQ";
constexpr std::string_view kAnswersMagic = "TLOA";
// The least bytes a cell and a row take, and an operator: a count is checked against them.
constexpr size_t kCellBytes = 4 + 1 + 1 + 1 + 8;
constexpr size_t kRowBytes = 4 + 8 + 8 + 8 + 1;
constexpr size_t kOperatorBytes = 1 + 8 + 1 + 1 + 1 + 8;

base::Status ReadCount(base::WireReader* in, size_t least_bytes, std::string_view what,
                       uint64_t* count) {
  TELLER_RETURN_IF_ERROR(in->Value(count, what));
  if (*count > in->left() / least_bytes) {
    return in->Bad(fmt::format("{} {}, more than the {} bytes left hold", *count, what, in->left()));
  }
  return base::OkStatus();
}

template <typename Enum>
base::Status ReadEnum(base::WireReader* in, size_t count, std::string_view what, Enum* value) {
  uint8_t raw = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&raw, what));
  if (raw >= count) return in->Bad(fmt::format("{} {}, below {} expected", what, raw, count));
  *value = static_cast<Enum>(raw);
  return base::OkStatus();
}

base::Status DecodeRow(base::WireReader* in, OperatorRow* row) {
  TELLER_RETURN_IF_ERROR(in->Value(&row->step, "a row's step"));
  TELLER_RETURN_IF_ERROR(in->Value(&row->group, "a row's global step"));
  TELLER_RETURN_IF_ERROR(in->Value(&row->value, "a row's value"));
  TELLER_RETURN_IF_ERROR(in->Value(&row->expected, "a row's expected value"));
  return in->Flag(&row->moved, "a row's moved flag");
}

base::Status DecodeCell(base::WireReader* in, OperatorCell* cell) {
  TELLER_RETURN_IF_ERROR(in->Value(&cell->rank, "a cell's rank"));
  TELLER_RETURN_IF_ERROR(
      ReadEnum(in, cause::kChannelCount, "a cell's channel", &cell->channel));
  TELLER_RETURN_IF_ERROR(
      ReadEnum(in, localize::kOperatorFamilyCount, "a cell's family", &cell->family));
  TELLER_RETURN_IF_ERROR(in->Flag(&cell->victim, "a cell's role"));
  uint64_t rows = 0;
  TELLER_RETURN_IF_ERROR(ReadCount(in, kRowBytes, "rows", &rows));
  cell->rows.resize(rows);
  for (OperatorRow& row : cell->rows) TELLER_RETURN_IF_ERROR(DecodeRow(in, &row));
  return base::OkStatus();
}

base::Status DecodeOperator(base::WireReader* in, CauseOperator* op) {
  TELLER_RETURN_IF_ERROR(ReadEnum(in, model::kLayerCount, "an operator's layer", &op->layer));
  std::string_view name;
  TELLER_RETURN_IF_ERROR(in->String("an operator's name", &name));
  op->name = std::string(name);
  TELLER_RETURN_IF_ERROR(in->Flag(&op->victim, "an operator's role"));
  TELLER_RETURN_IF_ERROR(in->Flag(&op->holds_moved, "an operator's holding flag"));
  TELLER_RETURN_IF_ERROR(in->Flag(&op->started_later, "an operator's later-start flag"));
  return in->Column("an operator's steps", &op->groups);
}

}  // namespace

std::string EncodeOperatorQueries(const std::vector<OperatorQuery>& queries) {
  base::WireWriter out(kQueriesMagic, kCauseOperatorsWireVersion);
  out.Value<uint64_t>(queries.size());
  for (const OperatorQuery& query : queries) {
    out.Value<int64_t>(query.first_group);
    out.Value<int64_t>(query.last_group);
    out.Value<uint8_t>(query.later_kernels ? 1 : 0);
    out.Value<uint64_t>(query.cells.size());
    for (const OperatorCell& cell : query.cells) {
      out.Value<int32_t>(cell.rank);
      out.Value<uint8_t>(static_cast<uint8_t>(cell.channel));
      out.Value<uint8_t>(static_cast<uint8_t>(cell.family));
      out.Value<uint8_t>(cell.victim ? 1 : 0);
      out.Value<uint64_t>(cell.rows.size());
      for (const OperatorRow& row : cell.rows) {
        out.Value<uint32_t>(row.step);
        out.Value<int64_t>(row.group);
        out.Value<double>(row.value);
        out.Value<double>(row.expected);
        out.Value<uint8_t>(row.moved ? 1 : 0);
      }
    }
  }
  return out.Take();
}

base::StatusOr<std::vector<OperatorQuery>> DecodeOperatorQueries(std::string_view bytes) {
  static const std::string kWhat = "cause operators' queries";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kQueriesMagic, kCauseOperatorsWireVersion));
  uint64_t count = 0;
  TELLER_RETURN_IF_ERROR(ReadCount(&in, 3 * sizeof(uint64_t), "causes", &count));
  std::vector<OperatorQuery> queries(count);
  for (OperatorQuery& query : queries) {
    TELLER_RETURN_IF_ERROR(in.Value(&query.first_group, "a window's first step"));
    TELLER_RETURN_IF_ERROR(in.Value(&query.last_group, "a window's last step"));
    TELLER_RETURN_IF_ERROR(in.Flag(&query.later_kernels, "the later kernels' flag"));
    uint64_t cells = 0;
    TELLER_RETURN_IF_ERROR(ReadCount(&in, kCellBytes, "cells", &cells));
    query.cells.resize(cells);
    for (OperatorCell& cell : query.cells) TELLER_RETURN_IF_ERROR(DecodeCell(&in, &cell));
  }
  TELLER_RETURN_IF_ERROR(in.End());
  return queries;
}

std::string EncodeCauseOperators(const std::vector<std::vector<CauseOperator>>& answers) {
  base::WireWriter out(kAnswersMagic, kCauseOperatorsWireVersion);
  out.Value<uint64_t>(answers.size());
  for (const std::vector<CauseOperator>& operators : answers) {
    out.Value<uint64_t>(operators.size());
    for (const CauseOperator& op : operators) {
      out.Value<uint8_t>(static_cast<uint8_t>(op.layer));
      out.String(op.name);
      out.Value<uint8_t>(op.victim ? 1 : 0);
      out.Value<uint8_t>(op.holds_moved ? 1 : 0);
      out.Value<uint8_t>(op.started_later ? 1 : 0);
      out.Column(op.groups);
    }
  }
  return out.Take();
}

base::StatusOr<std::vector<std::vector<CauseOperator>>> DecodeCauseOperators(
    std::string_view bytes) {
  static const std::string kWhat = "cause operators";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kAnswersMagic, kCauseOperatorsWireVersion));
  uint64_t count = 0;
  TELLER_RETURN_IF_ERROR(ReadCount(&in, sizeof(uint64_t), "causes", &count));
  std::vector<std::vector<CauseOperator>> answers(count);
  for (std::vector<CauseOperator>& operators : answers) {
    uint64_t size = 0;
    TELLER_RETURN_IF_ERROR(ReadCount(&in, kOperatorBytes, "operators", &size));
    operators.resize(size);
    for (CauseOperator& op : operators) TELLER_RETURN_IF_ERROR(DecodeOperator(&in, &op));
  }
  TELLER_RETURN_IF_ERROR(in.End());
  return answers;
}

}  // namespace teller::diagnose
