/* Checks tool arguments against the JSON-schema subset tool schemas use (type, required,
   properties, additionalProperties, enum, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
   minLength, maxLength, items), so a reviewer sees field errors before sending an edit. The server
   checks again with the full validator (approvals.api.parse_decision); its 400 errors win. */
(function () {
  "use strict";

  function typeOf(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "array";
    if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
    return typeof value;
  }

  function hasType(value, type) {
    if (Array.isArray(type)) return type.some(function (t) { return hasType(value, t); });
    var actual = typeOf(value);
    if (type === "number") return actual === "number" || actual === "integer";
    return actual === type;
  }

  function join(path, key) {
    return path ? path + "." + key : String(key);
  }

  function same(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }

  function check(schema, value, path, errors) {
    if (!schema || typeof schema !== "object") return;
    if (schema.type !== undefined && !hasType(value, schema.type)) {
      var wanted = Array.isArray(schema.type) ? schema.type.join(" or ") : schema.type;
      errors[path] = "must be " + (/^[aeiou]/.test(wanted) ? "an " : "a ") + wanted;
      return;
    }
    if (Array.isArray(schema.enum) && !schema.enum.some(function (x) { return same(x, value); })) {
      errors[path] = "must be one of " + schema.enum.map(function (x) { return JSON.stringify(x); }).join(", ");
      return;
    }
    if (typeof value === "number") {
      if (typeof schema.minimum === "number" && value < schema.minimum) {
        errors[path] = "must be at least " + schema.minimum;
      } else if (typeof schema.maximum === "number" && value > schema.maximum) {
        errors[path] = "must be at most " + schema.maximum;
      } else if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) {
        errors[path] = "must be greater than " + schema.exclusiveMinimum;
      } else if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) {
        errors[path] = "must be less than " + schema.exclusiveMaximum;
      }
    }
    if (typeof value === "string") {
      var length = Array.from(value).length;  // code points, as JSON schema counts them
      if (typeof schema.minLength === "number" && length < schema.minLength) {
        errors[path] = schema.minLength === 1 ? "must not be empty" : "must be at least " + schema.minLength + " characters";
      } else if (typeof schema.maxLength === "number" && length > schema.maxLength) {
        errors[path] = "must be at most " + schema.maxLength + " characters";
      }
    }
    if (typeOf(value) === "object") {
      var properties = schema.properties || {};
      (schema.required || []).forEach(function (name) {
        if (!Object.prototype.hasOwnProperty.call(value, name)) errors[join(path, name)] = "is required";
      });
      Object.keys(value).forEach(function (key) {
        if (Object.prototype.hasOwnProperty.call(properties, key)) {
          check(properties[key], value[key], join(path, key), errors);
        } else if (schema.additionalProperties === false) {
          errors[join(path, key)] = "is not a field of this tool";
        } else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
          check(schema.additionalProperties, value[key], join(path, key), errors);
        }
      });
    }
    if (Array.isArray(value) && schema.items && typeof schema.items === "object") {
      value.forEach(function (item, i) { check(schema.items, item, join(path, i), errors); });
    }
  }

  /* Field errors keyed by path ("" for the whole value); an empty object means valid. */
  function validate(schema, value) {
    var errors = {};
    check(schema, value, "", errors);
    return errors;
  }

  /* An edit form generated from a tool's input schema: a typed field per property (text,
     number, a select for an enum or an optional true/false, a checkbox for a required one, a
     JSON text area for objects, arrays and anything else), required fields marked, an error
     line under each. Built with createElement and textContent only (invariant 6). */
  function kindOf(schema) {
    var s = schema || {};
    if (Array.isArray(s.enum)) return "enum";
    var t = Array.isArray(s.type) ? s.type.filter(function (x) { return x !== "null"; }) : [s.type];
    if (t.length !== 1) return "json";
    if (t[0] === "string") return "string";
    if (t[0] === "integer" || t[0] === "number") return t[0];
    if (t[0] === "boolean") return "boolean";
    return "json";
  }

  /* A schema the form cannot show well (nested objects, arrays of objects, alternatives):
     the card opens its edit in JSON mode. */
  function complex(schema) {
    var props = (schema && schema.properties) || {};
    if (schema && (schema.oneOf || schema.anyOf || schema.allOf)) return true;
    return Object.keys(props).some(function (k) {
      var p = props[k] || {};
      return p.oneOf || p.anyOf || p.allOf || (kindOf(p) === "json" && p.type === "object" && p.properties);
    });
  }

  /* The order fields are shown in: the required ones in the schema's order, then its other
     fields, then any others the values have, each by name (approvals/templatetags/cards.py
     `_order`; PostgreSQL's jsonb keeps no key order, the required list keeps its own). */
  function fieldNames(schema, values) {
    var s = schema || {};
    var names = (Array.isArray(s.required) ? s.required : []).filter(function (n) {
      return typeof n === "string";
    });
    function add(keys) {
      keys.filter(function (k) { return names.indexOf(k) === -1; }).sort().forEach(function (k) {
        if (names.indexOf(k) === -1) names.push(k);
      });
    }
    add(Object.keys(s.properties || {}));
    (Array.isArray(values) ? values : [values]).forEach(function (v) {
      if (v && typeof v === "object" && !Array.isArray(v)) add(Object.keys(v));
    });
    return names;
  }

  function option(value, text) {
    var o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    return o;
  }

  function buildForm(form, schema, value, idPrefix) {
    form.replaceChildren();
    var props = (schema && schema.properties) || {};
    var required = (schema && schema.required) || [];
    fieldNames(schema, value).forEach(function (name) {
      var p = props[name] || {};
      var kind = kindOf(p);
      var has = Object.prototype.hasOwnProperty.call(value || {}, name);
      var current = has ? value[name] : undefined;
      var id = idPrefix + "-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
      var row = document.createElement("div");
      row.className = "form-field";
      row.dataset.field = name;
      row.dataset.kind = kind;
      var label = document.createElement("label");
      label.htmlFor = id;
      label.textContent = name;
      if (required.indexOf(name) !== -1) {
        row.dataset.required = "true";
        var mark = document.createElement("abbr");
        mark.className = "required";
        mark.title = "required";
        mark.textContent = "*";
        label.appendChild(document.createTextNode(" "));
        label.appendChild(mark);
      }
      row.appendChild(label);
      var input;
      if (kind === "enum") {
        input = document.createElement("select");
        if (required.indexOf(name) === -1) input.appendChild(option("", "(not set)"));
        p.enum.forEach(function (x) {
          input.appendChild(option(JSON.stringify(x), typeof x === "string" ? x : JSON.stringify(x)));
        });
        input.value = has ? JSON.stringify(current) : "";
      } else if (kind === "boolean" && required.indexOf(name) !== -1) {
        input = document.createElement("input");
        input.type = "checkbox";
        input.checked = current === true;
      } else if (kind === "boolean") {
        input = document.createElement("select");
        input.appendChild(option("", "(not set)"));
        input.appendChild(option("true", "yes"));
        input.appendChild(option("false", "no"));
        input.value = has ? String(current) : "";
      } else if (kind === "integer" || kind === "number") {
        input = document.createElement("input");
        input.type = "number";
        input.step = kind === "integer" ? "1" : "any";
        if (typeof p.minimum === "number") input.min = String(p.minimum);
        if (typeof p.maximum === "number") input.max = String(p.maximum);
        input.value = has && current !== null ? String(current) : "";
      } else if (kind === "string" && !(typeof current === "string" && (current.length > 60 || current.indexOf("\n") !== -1))) {
        input = document.createElement("input");
        input.type = "text";
        input.value = has ? String(current) : "";
      } else {
        input = document.createElement("textarea");
        input.rows = kind === "string" ? 3 : 4;
        input.spellcheck = false;
        input.value = !has ? "" : kind === "string" ? String(current) : JSON.stringify(current, null, 2);
      }
      if (kind === "string" && typeof p.maxLength === "number") input.maxLength = p.maxLength;
      input.id = id;
      input.name = "field-" + name;
      var error = document.createElement("p");
      error.className = "field-error";
      error.id = id + "-error";
      error.hidden = true;
      var hints = [];
      if (p.description) hints.push(p.description);
      if (kind === "json") hints.push("as JSON");
      if (hints.length) {
        var hint = document.createElement("p");
        hint.className = "hint";
        hint.id = id + "-hint";
        hint.textContent = hints.join(" · ");
        row.appendChild(input);
        row.appendChild(hint);
        input.setAttribute("aria-describedby", hint.id + " " + error.id);
      } else {
        row.appendChild(input);
        input.setAttribute("aria-describedby", error.id);
      }
      row.appendChild(error);
      form.appendChild(row);
    });
  }

  /* The form's value: {value, errors}; an empty optional field is left out. */
  function readForm(form) {
    var value = {};
    var errors = {};
    form.querySelectorAll(".form-field").forEach(function (row) {
      var name = row.dataset.field;
      var input = row.querySelector("input, select, textarea");
      var kind = row.dataset.kind;
      var raw = input.type === "checkbox" ? null : input.value;
      if (input.type === "checkbox") {
        value[name] = input.checked;
      } else if (raw === "" && kind !== "string") {
        return;  // not set
      } else if (raw === "" && !row.dataset.required) {
        return;
      } else if (kind === "enum" || (kind === "boolean" && input.tagName === "SELECT")) {
        value[name] = JSON.parse(raw);
      } else if (kind === "integer" || kind === "number") {
        var n = Number(raw);
        if (raw.trim() === "" || isNaN(n)) errors[name] = "must be a number";
        else value[name] = n;
      } else if (kind === "string") {
        value[name] = raw;
      } else {
        try {
          value[name] = JSON.parse(raw);
        } catch (e) {
          errors[name] = "is not valid JSON";
        }
      }
    });
    return { value: value, errors: errors };
  }

  /* Each error under its field (the top-level name of its path); returns the ones no field
     shows, for the list under the form. */
  function showFormErrors(form, errors) {
    var left = {};
    form.querySelectorAll(".form-field").forEach(function (row) {
      var line = row.querySelector(".field-error");
      line.textContent = "";
      line.hidden = true;
      row.querySelector("input, select, textarea").removeAttribute("aria-invalid");
    });
    Object.keys(errors).forEach(function (path) {
      var top = path.split(".")[0];
      var row = null;
      form.querySelectorAll(".form-field").forEach(function (r) { if (r.dataset.field === top) row = r; });
      if (!row) {
        left[path] = errors[path];
        return;
      }
      var line = row.querySelector(".field-error");
      line.textContent = (line.textContent ? line.textContent + "; " : "") + (path === top ? "" : path + ": ") + errors[path];
      line.hidden = false;
      row.querySelector("input, select, textarea").setAttribute("aria-invalid", "true");
    });
    return left;
  }

  window.GatewaySchema = {
    validate: validate,
    fieldNames: fieldNames,
    buildForm: buildForm,
    readForm: readForm,
    showFormErrors: showFormErrors,
    complex: complex,
  };
})();
