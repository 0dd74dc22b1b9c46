// StableHLO text -> syntax tree (stablehlo_ast.h). Accepts the generic MLIR form of every op
// (what our printer and `get_asm(print_generic_op_form=True)` write) and the pretty forms JAX
// prints by default: one-line ops (`%r = stablehlo.op items : types`), `stablehlo.while`
// with `cond { } do { }`, `stablehlo.reduce ... applies op` / `reducer(...) { }`, func.call,
// return. Attribute values stay raw text; the importer interprets them per op.
#include <cctype>
#include <cstdlib>

#include "base/error.h"
#include "ir/stablehlo_ast.h"

namespace torch_tpu::ir::shlo {
namespace {

#define PARSE_CHECK(cond, line, ...) \
  TPU_CHECK(cond, "[stablehlo import] ", __VA_ARGS__, " at line ", line)

struct Cursor {
  const std::string& s;
  size_t i = 0;
  int line_ = 1;
  size_t line_pos_ = 0;

  int line() {  // line of position i (incremental: positions only move forward)
    for (; line_pos_ < i && line_pos_ < s.size(); ++line_pos_)
      if (s[line_pos_] == '\n') ++line_;
    return line_;
  }
  bool eof() { ws(); return i >= s.size(); }
  void ws() {  // whitespace and // comments
    while (i < s.size()) {
      if (std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      else if (s.compare(i, 2, "//") == 0) { while (i < s.size() && s[i] != '\n') ++i; }
      else break;
    }
  }
  void hws() {  // whitespace within a line
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  char peek() { ws(); return i < s.size() ? s[i] : '\0'; }
  bool take(const char* t) {
    ws();
    size_t n = std::char_traits<char>::length(t);
    if (s.compare(i, n, t) != 0) return false;
    // a keyword must not run into an identifier character
    if (std::isalpha(static_cast<unsigned char>(t[n - 1])) && i + n < s.size() &&
        (std::isalnum(static_cast<unsigned char>(s[i + n])) || s[i + n] == '_' || s[i + n] == '.'))
      return false;
    i += n;
    return true;
  }
  void expect(const char* t) {
    int ln = line();
    PARSE_CHECK(take(t), ln, "expected '", t, "'; got '", s.substr(i, 24), "'");
  }
  static bool id_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' || c == '-';
  }
  std::string ident() {
    ws();
    size_t b = i;
    while (i < s.size() && id_char(s[i])) ++i;
    PARSE_CHECK(i > b, line(), "expected a name; got '", s.substr(b, 24), "'");
    return s.substr(b, i - b);
  }
  std::string value_name() {  // %name or %name#k
    ws();
    PARSE_CHECK(i < s.size() && s[i] == '%', line(), "expected a value (%name); got '", s.substr(i, 24), "'");
    size_t b = i++;
    while (i < s.size() && (id_char(s[i]) || s[i] == '#')) ++i;
    return s.substr(b, i - b);
  }
  std::string symbol() {  // @name or @"name"
    ws();
    PARSE_CHECK(i < s.size() && s[i] == '@', line(), "expected a symbol (@name)");
    ++i;
    if (i < s.size() && s[i] == '"') return quoted();
    return ident();
  }
  std::string quoted() {
    ws();
    PARSE_CHECK(i < s.size() && s[i] == '"', line(), "expected a string");
    size_t b = ++i;
    while (i < s.size() && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
    PARSE_CHECK(i < s.size(), line(), "unterminated string");
    return s.substr(b, i++ - b);
  }
  // Raw balanced text up to (not including) a top-level character of `stops`. `->` is one
  // token (its '>' closes nothing).
  std::string raw(const char* stops) {
    ws();
    size_t b = i;
    int depth = 0;
    while (i < s.size()) {
      char c = s[i];
      if (c == '"') { quoted(); continue; }
      if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') { i += 2; continue; }
      if (depth == 0 && std::char_traits<char>::find(stops, std::char_traits<char>::length(stops), c)) break;
      if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
      if (c == ')' || c == ']' || c == '}' || c == '>') {
        if (depth == 0) break;
        --depth;
      }
      ++i;
    }
    std::string r = s.substr(b, i - b);
    while (!r.empty() && std::isspace(static_cast<unsigned char>(r.back()))) r.pop_back();
    return r;
  }
};

DType elem_type(const std::string& t, int line) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"i1", DType::Bool}, {"ui8", DType::U8}, {"i8", DType::I8}, {"i16", DType::I16},
      {"i32", DType::I32}, {"i64", DType::I64}, {"f16", DType::F16}, {"bf16", DType::BF16},
      {"f32", DType::F32}, {"f64", DType::F64}, {"ui64", DType::U64}};
  for (auto& [n, d] : kTypes)
    if (t == n) return d;
  TPU_UNIMPLEMENTED("[stablehlo import] unsupported element type '", t, "' at line ", line,
                    "; expected one of i1, ui8, i8, i16, i32, i64, ui64, f16, bf16, f32, f64");
}

// A comma-separated list of types: "tensor<..>, tensor<..>" or "(tensor<..>, ...)".
std::vector<Type> type_list(const std::string& raw, int line) {
  std::string s = raw;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return {};
  s = s.substr(b);
  if (!s.empty() && s[0] == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  std::vector<Type> r;
  Cursor c{s};
  while (!c.eof()) {
    std::string t = c.raw(",");
    if (!t.empty()) r.push_back(parse_type(t, line));
    if (!c.take(",")) break;
  }
  return r;
}

// "(ins) -> outs", "T -> T" (chlo), or a plain type list (its last type is the result's).
void functional_type(const std::string& raw, int line, Op& op) {
  Cursor c{raw};
  size_t arrow = raw.find("->");
  if (arrow != std::string::npos && c.peek() != '(') {
    op.operand_types = type_list(raw.substr(0, arrow), line);
    op.result_types = type_list(raw.substr(arrow + 2), line);
    return;
  }
  if (c.peek() == '(') {
    size_t save = c.i;
    ++c.i;
    std::string ins = c.raw(")");
    c.expect(")");
    if (c.take("->")) {
      op.operand_types = type_list(ins, line);
      op.result_types = type_list(raw.substr(c.i), line);
      return;
    }
    c.i = save;
  }
  std::vector<Type> ts = type_list(raw, line);
  if (!ts.empty()) op.result_types = {ts.back()};
  op.operand_types = ts;
}

std::map<std::string, std::string> attr_dict(Cursor& c) {  // after '{' ... '}' consumed
  std::map<std::string, std::string> r;
  c.expect("{");
  while (c.peek() != '}') {
    std::string key = c.peek() == '"' ? c.quoted() : c.ident();
    std::string val = "unit";
    if (c.take("=")) val = c.raw(",}");
    r[key] = val;
    if (!c.take(",")) break;
  }
  c.expect("}");
  return r;
}

Region region(Cursor& c, bool allow_block_label);
Op op(Cursor& c);

// Region body after '{': optional ^bb0(args): label, ops until '}'.
Region region(Cursor& c, bool allow_block_label) {
  Region r;
  c.expect("{");
  if (allow_block_label && c.peek() == '^') {  // ^bb0(%a: T, ...):
    ++c.i;
    c.ident();
    if (c.take("(")) {
      while (c.peek() != ')') {
        r.args.push_back(c.value_name());
        c.expect(":");
        r.arg_types.push_back(parse_type(c.raw(",)"), c.line()));
        if (!c.take(",")) break;
      }
      c.expect(")");
    }
    c.expect(":");
  }
  while (c.peek() != '}') {
    PARSE_CHECK(!c.eof(), c.line(), "unexpected end of text inside a region");
    r.ops.push_back(op(c));
  }
  c.expect("}");
  return r;
}

void generic_op(Cursor& c, Op& o) {
  o.name = c.quoted();
  c.expect("(");
  while (c.peek() != ')') {
    o.operands.push_back(c.value_name());
    if (!c.take(",")) break;
  }
  c.expect(")");
  if (c.take("<{")) {
    c.i -= 1;  // back onto '{'
    for (auto& kv : attr_dict(c)) o.attrs.insert(kv);
    c.expect(">");
  }
  if (c.peek() == '(') {
    ++c.i;
    while (c.peek() == '{') {
      o.regions.push_back(region(c, true));
      if (!c.take(",")) break;
    }
    c.expect(")");
  }
  if (c.peek() == '{')
    for (auto& kv : attr_dict(c)) o.attrs.insert(kv);
  c.expect(":");
  int ln = c.line();
  functional_type(c.raw("\n"), ln, o);
}

// `items : types` on one line: operands, `key = value` attributes, bare words, `dense<..>`
// (constant value), `[a:b, ...]` (slice), `@callee(...)`.
void pretty_items(Cursor& c, Op& o) {
  std::string body = c.raw("\n");
  int ln = o.line;
  // the type signature follows the last top-level " : "
  Cursor b{body};
  std::vector<std::string> toks;
  std::string types;
  while (!b.eof()) {
    if (b.take(":")) {
      types = body.substr(b.i);
      break;
    }
    if (b.take(",")) continue;
    if (b.take("=")) { toks.push_back("="); continue; }
    std::string t = b.raw(" ,:=\t\n");
    if (t.empty()) {  // a '(' group (call operands) or stray character
      PARSE_CHECK(b.i < body.size(), ln, "malformed op '", o.name, "'");
      toks.push_back(std::string(1, body[b.i++]));
      continue;
    }
    toks.push_back(t);
  }
  for (size_t k = 0; k < toks.size(); ++k) {
    const std::string& t = toks[k];
    if (k + 2 < toks.size() + 1 && k + 1 < toks.size() && toks[k + 1] == "=") {
      PARSE_CHECK(k + 2 < toks.size(), ln, "attribute '", t, "' has no value");
      std::string v = toks[k + 2];
      k += 2;
      while (k + 2 < toks.size() && toks[k + 1] == "x") {  // "[0] x [1]"
        v += " x " + toks[k + 2];
        k += 2;
      }
      o.attrs[t] = v;
    } else if (t[0] == '%') {
      o.operands.push_back(t);
    } else if (t.rfind("dense<", 0) == 0 || t.rfind("dense_resource<", 0) == 0) {
      o.attrs["value"] = t;
    } else if (t[0] == '[') {
      o.attrs["slice"] = t;
    } else if (t[0] == '@') {
      size_t p = t.find('(');
      o.attrs["callee"] = t.substr(0, p);
      if (p != std::string::npos) {
        Cursor a{t, p + 1};
        while (a.peek() == '%') {
          o.operands.push_back(a.value_name());
          if (!a.take(",")) break;
        }
      }
    } else if (t[0] == '{') {  // trailing attribute dictionary
      Cursor a{t};
      for (auto& kv : attr_dict(a)) o.attrs.insert(kv);
    } else if (t[0] == '"') {
      o.attrs["name"] = t;
    } else {
      o.words.push_back(t);
    }
  }
  if (!types.empty()) functional_type(types, ln, o);
}

void pretty_while(Cursor& c, Op& o) {
  c.expect("(");
  std::vector<std::string> names;
  while (c.peek() != ')') {
    names.push_back(c.value_name());
    c.expect("=");
    o.operands.push_back(c.value_name());
    if (!c.take(",")) break;
  }
  c.expect(")");
  c.expect(":");
  int ln = c.line();
  std::vector<Type> ts = type_list(c.raw("\n"), ln);
  o.operand_types = o.result_types = ts;
  for (const char* kw : {"cond", "do"}) {
    c.expect(kw);
    Region r = region(c, false);
    r.args = names;
    r.arg_types = ts;
    o.regions.push_back(std::move(r));
  }
}

// stablehlo.reduce(%x init: %c), ... (applies OP | reducer(...) { }) across dimensions = [..]
void pretty_reduce(Cursor& c, Op& o, const std::string& kind) {
  std::vector<std::string> inits;
  do {
    c.expect("(");
    o.operands.push_back(c.value_name());
    c.expect("init");
    c.expect(":");
    inits.push_back(c.value_name());
    c.expect(")");
  } while (c.take(","));
  o.operands.insert(o.operands.end(), inits.begin(), inits.end());
  if (c.take("applies")) o.attrs["applies"] = c.ident();
  c.expect("across");
  c.expect("dimensions");
  c.expect("=");
  o.attrs["dimensions"] = c.raw(" :\n");
  c.expect(":");
  int ln = c.line();
  functional_type(c.raw("\n"), ln, o);
  if (c.take("reducer")) {  // (%a: T, %b: T) pairs per input: (lhs, rhs) per input
    Region r;
    std::vector<std::string> lhs, rhs;
    std::vector<Type> lt, rt;
    while (c.peek() == '(') {
      ++c.i;
      lhs.push_back(c.value_name());
      c.expect(":");
      lt.push_back(parse_type(c.raw(","), c.line()));
      c.expect(",");
      rhs.push_back(c.value_name());
      c.expect(":");
      rt.push_back(parse_type(c.raw(")"), c.line()));
      c.expect(")");
    }
    Region body = region(c, false);
    body.args = lhs;
    body.args.insert(body.args.end(), rhs.begin(), rhs.end());
    body.arg_types = lt;
    body.arg_types.insert(body.arg_types.end(), rt.begin(), rt.end());
    o.regions.push_back(std::move(body));
  }
  (void)kind;
}

Op op(Cursor& c) {
  Op o;
  o.line = c.line();
  if (c.peek() == '%') {  // results
    std::vector<std::string> names;
    do {
      std::string n = c.value_name();
      if (c.s[c.i] == ':') {  // %1:5
        ++c.i;
        size_t b = c.i;
        while (c.i < c.s.size() && std::isdigit(static_cast<unsigned char>(c.s[c.i]))) ++c.i;
        int k = std::atoi(c.s.substr(b, c.i - b).c_str());
        for (int j = 0; j < k; ++j) names.push_back(n + "#" + std::to_string(j));
      } else {
        names.push_back(n);
      }
    } while (c.take(","));
    c.expect("=");
    o.results = names;
  }
  if (c.peek() == '"') {
    generic_op(c, o);
    if (o.results.size() > 1 || o.result_types.size() <= 1) return o;
    // "%1" naming several results of a generic op: expand to %1#k
    std::string base = o.results.empty() ? "" : o.results[0];
    o.results.clear();
    for (size_t j = 0; j < o.result_types.size(); ++j) o.results.push_back(base + "#" + std::to_string(j));
    return o;
  }
  o.name = c.ident();
  if (o.name == "return" || o.name == "call") o.name = "func." + o.name;
  if (o.name == "stablehlo.while") {
    pretty_while(c, o);
  } else if (o.name == "stablehlo.reduce") {
    pretty_reduce(c, o, o.name);
  } else if (o.name == "func.return" || o.name == "stablehlo.return") {
    c.hws();
    if (c.i < c.s.size() && c.s[c.i] != '\n' && c.s[c.i] != '}') pretty_items(c, o);
  } else {
    pretty_items(c, o);
  }
  return o;
}

Func func(Cursor& c) {
  Func f;
  f.line = c.line();
  if (c.take("public")) f.is_public = true;
  else if (c.take("private")) f.is_public = false;
  f.name = c.symbol();
  c.expect("(");
  while (c.peek() != ')') {
    f.body.args.push_back(c.value_name());
    c.expect(":");
    f.body.arg_types.push_back(parse_type(c.raw(",){"), c.line()));
    if (c.peek() == '{') attr_dict(c);  // argument attributes
    if (!c.take(",")) break;
  }
  c.expect(")");
  if (c.take("->")) {
    bool paren = c.take("(");
    do {
      if (paren && c.peek() == ')') break;
      f.result_types.push_back(parse_type(c.raw(paren ? ",){" : ",{"), c.line()));
      if (c.peek() == '{' && paren) attr_dict(c);
    } while (paren && c.take(","));
    if (paren) c.expect(")");
  }
  if (c.take("attributes")) attr_dict(c);
  Region body = region(c, false);
  f.body.ops = std::move(body.ops);
  return f;
}

// The generic form of func.func: "func.func"() <{function_type = ..., sym_name = "main",
// sym_visibility = "private"}> ({ ^bb0(...): ... }) : () -> ()
Func generic_func(const Op& o) {
  Func f;
  f.line = o.line;
  auto it = o.attrs.find("sym_name");
  PARSE_CHECK(it != o.attrs.end(), o.line, "func.func without sym_name");
  f.name = it->second.substr(1, it->second.size() - 2);
  auto vis = o.attrs.find("sym_visibility");
  f.is_public = vis == o.attrs.end() || vis->second.find("private") == std::string::npos;
  PARSE_CHECK(o.regions.size() == 1, o.line, "func.func without a body");
  f.body = o.regions[0];
  auto ft = o.attrs.find("function_type");
  if (ft != o.attrs.end()) {
    Op tmp;
    functional_type(ft->second, o.line, tmp);
    f.result_types = tmp.result_types;
  }
  return f;
}

void module_body(Cursor& c, Module& m, char close) {
  while (!c.eof() && c.peek() != close) {
    if (c.take("func.func")) {
      m.funcs.push_back(func(c));
    } else if (c.take("module")) {
      if (c.peek() == '@') c.symbol();
      if (c.take("attributes")) attr_dict(c);
      c.expect("{");
      module_body(c, m, '}');
      c.expect("}");
    } else if (c.peek() == '"') {
      Op o = op(c);
      if (o.name == "builtin.module") {
        for (const Region& r : o.regions)
          for (const Op& f : r.ops)
            if (f.name == "func.func") m.funcs.push_back(generic_func(f));
      } else if (o.name == "func.func") {
        m.funcs.push_back(generic_func(o));
      } else {
        PARSE_CHECK(false, o.line, "expected a module or func.func; got '", o.name, "'");
      }
    } else {
      PARSE_CHECK(false, c.line(), "expected a module or func.func; got '", c.s.substr(c.i, 24), "'");
    }
  }
}

}  // namespace

Type parse_type(const std::string& raw, int line) {
  std::string s = raw;
  size_t b = s.find_first_not_of(" \t\n");
  s = b == std::string::npos ? "" : s.substr(b);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (s.rfind("tensor<", 0) != 0 || s.back() != '>') {
    if (s.find("complex") != std::string::npos || s.find("token") != std::string::npos ||
        s.find("tuple") != std::string::npos)
      TPU_UNIMPLEMENTED("[stablehlo import] unsupported type '", s, "' at line ", line,
                        "; expected a ranked tensor of a real or integer type");
    // a bare element type (a scalar), e.g. the i64 of "0 : i64" is not a value type
    Type t;
    t.dtype = elem_type(s, line);
    return t;
  }
  std::string in = s.substr(7, s.size() - 8);
  PARSE_CHECK(in.find(',') == std::string::npos, line, "tensor encodings are not supported; got '", s, "'");
  Type t;
  size_t p = 0;
  while (true) {
    size_t x = in.find('x', p);
    std::string part = in.substr(p, x == std::string::npos ? std::string::npos : x - p);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (part == "?")
      TPU_UNIMPLEMENTED("[stablehlo import] dynamic shape '", s, "' at line ", line,
                        "; expected static shapes (trace with concrete shapes)");
    if (!digits || x == std::string::npos) {
      t.dtype = elem_type(in.substr(p), line);
      break;
    }
    t.shape.push_back(std::stoll(part));
    p = x + 1;
  }
  return t;
}

std::vector<int64_t> parse_int_list(const std::string& raw, int line) {
  std::string s = raw;
  if (s.rfind("array<", 0) == 0) {
    size_t colon = s.find(':');
    s = colon == std::string::npos ? "" : s.substr(colon + 1, s.size() - colon - 2);
  }
  std::vector<int64_t> r;
  size_t i = 0;
  while (i < s.size()) {
    if (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '-') {
      char* end = nullptr;
      r.push_back(std::strtoll(s.c_str() + i, &end, 10));
      i = end - s.c_str();
    } else if (s[i] == ':') {
      break;  // "[0, 1] : tensor<..>" type suffix (dense<[..]> lists are not read here)
    } else {
      PARSE_CHECK(std::string(" \t,[]").find(s[i]) != std::string::npos, line,
                  "expected a list of integers; got '", raw, "'");
      ++i;
    }
  }
  return r;
}

int64_t parse_int(const std::string& raw, int line) {
  std::vector<int64_t> v = parse_int_list(raw, line);
  PARSE_CHECK(v.size() == 1, line, "expected one integer; got '", raw, "'");
  return v[0];
}

Module parse_stablehlo(const std::string& text) {
  Cursor c{text};
  Module m;
  module_body(c, m, '\0');
  TPU_CHECK(!m.funcs.empty(), "[stablehlo import] no func.func in the text; expected a module "
            "with a public @main (jax.jit(f).lower(...).as_text())");
  return m;
}

}  // namespace torch_tpu::ir::shlo
