//! An ONNX graph built node by node ([`super::proto`]'s messages): weights
//! as initializers, every intermediate value named once.

use super::proto::{
    ATTRIBUTE_INT, ATTRIBUTE_INTS, AttributeProto, Dimension, FLOAT, GraphProto, INT64, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TensorType, TypeProto,
    ValueInfoProto,
};
use prost::Message;

/// The operator set the graph uses: onnxruntime since 1.13 runs it, and
/// `Squeeze`, `Unsqueeze` and `Clip` take their axes and bounds as inputs.
pub const OPSET: i64 = 17;
/// The IR version that goes with [`OPSET`].
const IR_VERSION: i64 = 8;

/// A dimension of a graph input or output: a number, or the batch, named.
#[derive(Clone, Copy)]
pub enum Dim {
    Batch,
    Fixed(usize),
}

#[derive(Default)]
pub struct Graph {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    names: usize,
}

impl Graph {
    /// A name not used before, from `hint`.
    fn fresh(&mut self, hint: &str) -> String {
        self.names += 1;
        format!("{hint}_{}", self.names)
    }

    /// An f32 initializer `[dims]` named `name` (a weight keeps its
    /// published name).
    pub fn weight(&mut self, name: &str, dims: &[usize], values: &[f32]) -> String {
        self.initializers.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: FLOAT,
            name: name.to_string(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name.to_string()
    }

    /// A scalar f32 constant.
    pub fn scalar(&mut self, hint: &str, value: f32) -> String {
        let name = self.fresh(hint);
        self.weight(&name, &[], &[value])
    }

    /// A 1-D int64 constant (shapes, axes, slice bounds).
    pub fn ints(&mut self, hint: &str, values: &[i64]) -> String {
        let name = self.fresh(hint);
        self.initializers.push(TensorProto {
            dims: vec![values.len() as i64],
            data_type: INT64,
            name: name.clone(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name
    }

    /// A node of `op` with one output, named from the op.
    pub fn op(&mut self, op: &str, inputs: &[&str], attributes: Vec<AttributeProto>) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.node(op, inputs, attributes, &[&out]);
        out
    }

    /// A node of `op` with the outputs `outputs` (empty names: unused).
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        attributes: Vec<AttributeProto>,
        outputs: &[&str],
    ) {
        let name = self.fresh(op);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name,
            op_type: op.to_string(),
            attribute: attributes,
        });
    }

    /// `count` fresh output names for a node with several.
    pub fn outputs(&mut self, hint: &str, count: usize) -> Vec<String> {
        (0..count).map(|_| self.fresh(hint)).collect()
    }

    pub fn input(&mut self, name: &str, dims: &[Dim]) {
        self.inputs.push(value_info(name, dims));
    }

    /// Declares `value` (already computed) as the graph output `name`.
    pub fn output(&mut self, value: &str, name: &str, dims: &[Dim]) {
        self.node("Identity", &[value], vec![], &[name]);
        self.outputs.push(value_info(name, dims));
    }

    /// The model's bytes.
    pub fn encode(self, doc: &str) -> Vec<u8> {
        let graph = GraphProto {
            node: self.nodes,
            name: "sebulba_policy".into(),
            initializer: self.initializers,
            doc_string: doc.into(),
            input: self.inputs,
            output: self.outputs,
        };
        ModelProto {
            ir_version: IR_VERSION,
            producer_name: "sebulba".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            graph: Some(graph),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: OPSET,
            }],
        }
        .encode_to_vec()
    }
}

fn value_info(name: &str, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match *d {
            Dim::Batch => Dimension {
                dim_value: None,
                dim_param: Some("batch".into()),
            },
            Dim::Fixed(n) => Dimension {
                dim_value: Some(n as i64),
                dim_param: None,
            },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorType {
                elem_type: FLOAT,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
    }
}

/// An integer attribute.
pub fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: value,
        ints: vec![],
        r#type: ATTRIBUTE_INT,
    }
}

/// A list-of-integers attribute.
pub fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: 0,
        ints: values.to_vec(),
        r#type: ATTRIBUTE_INTS,
    }
}
