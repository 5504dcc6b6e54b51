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

  window.GatewaySchema = { validate: validate };
})();
