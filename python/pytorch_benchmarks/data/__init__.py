"""Input pipelines: synthetic tensors, torchvision ImageFolder and Caffe LMDB datasets."""
