// The syntax tree of a StableHLO module as text (internal to the importer): functions,
// regions and ops, with attributes kept as raw text that the importer reads on demand.
// Built by parse_stablehlo (stablehlo_parse.cpp) from either MLIR form — the generic
// `"stablehlo.add"(%a, %b) {...} : (...) -> ...` or the pretty `stablehlo.add %a, %b : T` —
// and read by the importer (stablehlo_import.cpp). Plain data, no ownership subtleties.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir::shlo {

struct Type {
  DType dtype = DType::F32;
  Shape shape;
};

struct Op;
struct Region {
  std::vector<std::string> args;  // block argument names (%arg2, %iterArg, ...)
  std::vector<Type> arg_types;
  std::vector<Op> ops;            // ends with a return op
};

struct Op {
  std::string name;                            // "stablehlo.add", "func.call", "func.return", ...
  std::vector<std::string> results;            // value names; "%1#k" for the k-th of "%1:n"
  std::vector<std::string> operands;           // value names as referenced ("%0", "%1#2")
  std::map<std::string, std::string> attrs;    // name -> raw attribute text
  std::vector<std::string> words;              // bare keywords of the pretty form (LT, SIGNED)
  std::vector<Region> regions;
  std::vector<Type> operand_types, result_types;
  int line = 0;
};

struct Func {
  std::string name;  // without '@'
  bool is_public = false;
  Region body;       // args = parameters
  std::vector<Type> result_types;
  int line = 0;
};

struct Module {
  std::vector<Func> funcs;
  const Func* find(const std::string& name) const {
    for (const Func& f : funcs)
      if (f.name == name) return &f;
    return nullptr;
  }
};

// Parses a StableHLO module (or a bare func.func). Throws Error "[stablehlo import] ... at
// line N" on malformed text or unsupported types (dynamic shapes, tuples, tokens, complex).
Module parse_stablehlo(const std::string& text);

// Attribute readers shared by the importer (raw text as stored in Op::attrs).
std::vector<int64_t> parse_int_list(const std::string& raw, int line);  // [1, 2] / array<i64: 1, 2>
int64_t parse_int(const std::string& raw, int line);                     // "0 : i64" / "0"
Type parse_type(const std::string& raw, int line);                       // tensor<2x3xf32>

}  // namespace torch_tpu::ir::shlo
